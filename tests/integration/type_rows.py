"""Tables of every MySQL type and of every temporal precision, with edge rows, and how the server shows them.

Shared by the type-parity, row-decoder, snapshot-writer and engine tests, which land the same rows by other paths.
"""

from __future__ import annotations

import datetime as dt

from tests.conftest import sql

COLUMNS = """
    id INT PRIMARY KEY,
    flag TINYINT(1), ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
    mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
    f FLOAT, d DOUBLE, dec_small DECIMAL(12,2), dec_wide DECIMAL(65,30),
    b1 BIT(1), b64 BIT(64),
    c CHAR(10), vc VARCHAR(50), tx TEXT, bin BINARY(4), vbin VARBINARY(10), bl BLOB,
    e ENUM('small','medium','large'), st SET('a','b','c'),
    dte DATE, dt0 DATETIME, dt6 DATETIME(6), ts0 TIMESTAMP NULL, ts6 TIMESTAMP(6) NULL,
    tm0 TIME, tm6 TIME(6), yr YEAR, js JSON
"""

ROWS = [
    "(1, 1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, -9223372036854775808, "
    "18446744073709551615, 1.5, -2.25e100, -1234567890.12, "
    "12345678901234567890123456789012345.123456789012345678901234567890, b'1', "
    "b'1111111111111111111111111111111111111111111111111111111111111111', 'ab', 'zoë 😀 ✓', REPEAT('t', 300), "
    "x'00010200', x'ff00', x'deadbeef', 'large', 'a,c', '2024-02-29', '2024-01-01 23:59:59', "
    "'1999-12-31 23:59:59.999999', '2038-01-19 03:14:07', '2024-06-01 12:00:00.000001', "
    "'-838:59:59', '123:45:06.000007', 2155, '{\"k\": [1, 2.5, null, true], \"s\": \"é\"}')",
    "(2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.1, 0.1, 0, 0, b'0', b'0', '', '', '', x'00', x'', x'', "
    "'small', '', '1000-01-01', '1000-01-01 00:00:00', '9999-12-31 23:59:59.999999', "
    "'1970-01-01 00:00:01', '1970-01-01 00:00:01.5', '00:00:00', '-00:00:00.5', 1901, '[]')",
    "(3" + ", NULL" * 34 + ")",
    "(6" + ", NULL" * 32 + ", 0, NULL)",  # YEAR 0000: the binlog stores 0, every other YEAR as year - 1900
]


#: COLUMNS' names, in order.
NAMES = ["id", "flag", "ti", "tiu", "si", "siu", "mi", "miu", "i", "iu", "bi", "biu", "f", "d", "dec_small", "dec_wide",
         "b1", "b64", "c", "vc", "tx", "bin", "vbin", "bl", "e", "st", "dte", "dt0", "dt6", "ts0", "ts6", "tm0", "tm6",
         "yr", "js"]
#: COLUMNS that are DECIMALs wider than delta-rs 1.6.6 writes statistics for exactly (`choice.inexact_statistics`).
WIDE_DECIMALS = ("biu", "dec_wide", "b64")


# Edge values of every fractional precision, asymmetric fractions included: a negative TIME's fraction is
# stored as a complement, so -00:00:01.250000 read naively is -00:00:01.750000 (.5 survives that, .25 does not).
TIMES = ["-838:59:59.999999", "-838:59:59", "-00:00:00.000001", "-00:00:01.250000", "00:00:00.000001", "838:59:59",
         "838:59:59.999999", "-01:00:00.100000", "-00:00:00.5", "-12:34:56.789012", "00:00:00", "-00:00:01",
         "-00:00:00.999999", "-00:00:00.010000", "-00:00:00.000100", "-23:59:59.990000"]
DATETIMES = ["1000-01-01 00:00:00.000001", "9999-12-31 23:59:59.999999", "1000-01-01 00:00:00",
             "1970-01-01 00:00:00.000001", "2024-02-29 12:34:56.5", "1969-12-31 23:59:59.999999"]
TIMESTAMPS = ["1970-01-01 00:00:01", "2038-01-19 03:14:07.999999", "1970-01-01 00:00:01.000001",
              "2000-02-29 23:59:59.999999", "2038-01-19 03:14:07", "1999-12-31 23:59:59.5"]
FSPS = range(7)
TEMPORAL_COLUMNS = ", ".join(
    ["id INT PRIMARY KEY"]
    + [f"tm{fsp} TIME({fsp})" for fsp in FSPS]
    + [f"dt{fsp} DATETIME({fsp})" for fsp in FSPS]
    + [f"ts{fsp} TIMESTAMP({fsp}) NULL" for fsp in FSPS]
)
TEMPORAL_NAMES = [f"{kind}{fsp}" for kind in ("tm", "dt", "ts") for fsp in FSPS]


def temporal_rows() -> list[str]:
    rows = []
    for index in range(max(len(TIMES), len(DATETIMES), len(TIMESTAMPS))):
        values = [str(index)]
        for source in (TIMES, DATETIMES, TIMESTAMPS):
            values += [f"'{source[index]}'" if index < len(source) else "NULL"] * len(FSPS)
        rows.append(f"({', '.join(values)})")
    return rows


def insert_temporal_rows(mariadb, table: str) -> None:
    # TIMESTAMP literals in UTC; the server rounds or truncates extra digits as it stores them.
    sql(mariadb, "SET time_zone = '+00:00'", f"INSERT INTO {table} VALUES {', '.join(temporal_rows())}")


def server_temporal_text(mariadb, table: str) -> list[tuple]:
    casts = ", ".join(f"CAST({name} AS CHAR)" for name in TEMPORAL_NAMES)
    return sql(mariadb, "SET time_zone = '+00:00'", f"SELECT id, {casts} FROM {table} ORDER BY id")


def temporal_text(value, fsp: int) -> str | None:
    """MySQL's text of a decoded TIME (already text), DATETIME or TIMESTAMP (as UTC) value."""
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC)
    text = f"{value:%Y-%m-%d %H:%M:%S}"
    return text + "." + f"{value.microsecond:06d}"[:fsp] if fsp else text


def as_temporal_text(row: tuple) -> tuple:
    return (row[0], *(temporal_text(value, int(name[2])) for name, value in zip(TEMPORAL_NAMES, row[1:], strict=True)))
