#!/bin/bash
# Runs once, when the MySQL container first initialises its data folder: a small demo schema and the
# least-privilege CDC user. The password comes from the container's environment, not from this file.
set -euo pipefail
mysql -uroot -p"${MYSQL_ROOT_PASSWORD}" <<SQL
CREATE DATABASE IF NOT EXISTS shop CHARACTER SET utf8mb4;
CREATE TABLE shop.customers (id INT PRIMARY KEY, email VARCHAR(120) NOT NULL, name VARCHAR(80),
  created_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3));
CREATE TABLE shop.orders (id BIGINT PRIMARY KEY, customer_id INT NOT NULL, amount DECIMAL(12,2) NOT NULL,
  status ENUM('new','paid','shipped','cancelled') NOT NULL, placed_at DATETIME(6) NOT NULL, note TEXT);
INSERT INTO shop.customers (id, email, name) VALUES (1, 'a@example.com', 'Ada'), (2, 'b@example.com', 'Bob');
INSERT INTO shop.orders VALUES (1, 1, 12.50, 'new', '2026-01-01 10:00:00', NULL),
  (2, 2, 99.99, 'paid', '2026-01-02 11:30:00.123456', 'gift');
-- mysql_native_password keeps the example free of TLS setup; in production use caching_sha2_password
-- over TLS and set source.ssl_ca (docs/production.md, "Secrets and TLS").
CREATE USER 'cdc'@'%' IDENTIFIED WITH mysql_native_password BY '${MYSQL_CDC_PASSWORD}';
GRANT SELECT ON shop.* TO 'cdc'@'%';
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc'@'%';
SQL
