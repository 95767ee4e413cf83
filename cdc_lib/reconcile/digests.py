"""The canonical text and digest of a row, one definition per engine: SQL for MySQL, a Column for Spark.

A row's digest is a 60-bit hash (MD5) of its canonical text; reconciliation sums the digests of a chunk's rows
on both sides (`cdc_lib.reconcile.chunks`) and compares them.

The canonical text of a value is derived from the one type mapping
(`cdc_lib.model.types.spark_type_ddl`), so both engines produce the same bytes for the
same value, and the comparison is exact for every type (docs/production.md, "Reconcile"):

- FLOAT and DOUBLE are written as their exact binary value, `<mantissa>p<exponent>` (the integer mantissa
  of the IEEE 754 encoding and its power of two), computed by exact arithmetic alone in both engines
  (scaling by powers of two, comparisons, integer casts), so any changed bit changes the text. Neither
  engine's decimal text serves: MariaDB prints a FLOAT with 6 digits, and Java 17 (Spark) does not print
  the shortest round-trip digits. +0 and -0 are one value ("0"), as MySQL compares and prints them.
- BLOB/TEXT/JSON values are represented by the MD5 of their bytes, so no row text outgrows
  `max_allowed_packet` (past it MySQL's HEX() and CONCAT() return NULL, which would read as a NULL value).
- The digests are summed as exact integers (MySQL's DECIMAL SUM, Spark's decimal(38,0)): no value can make
  the sum overflow or lose a digit, whatever the column types hold.

What it cannot tell: two different chunk contents whose digest sums agree (about one chance in 2^60 per
differing chunk), and +0 from -0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdc_lib.model.types import TEXT_TRANSFERRED_TEMPORALS, ColumnInfo, quote_identifier, spark_type_ddl

if TYPE_CHECKING:
    from pyspark.sql import Column

_FLOAT_TARGETS = {"float", "double"}
_TEXT_KINDS = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "json"}
# Kinds whose values may be megabytes long: represented by the MD5 of their bytes (see the module docstring).
_LONG_KINDS = {"tinytext", "text", "mediumtext", "longtext", "json", "tinyblob", "blob", "mediumblob", "longblob"}
_NULL_MARK = "N"
# The smallest normal DOUBLE, 2^-1022; below it the exponent is fixed at -1074 (subnormals).
_MIN_NORMAL = "2.2250738585072014e-308"
# Powers of two as exact DOUBLE literals (repr round-trips), so that the server computes no POW for them.
_TWO_200 = repr(2.0**200)
_TWO_537 = repr(2.0**537)


def _mysql_exact_float(quoted: str) -> str:
    """SQL giving a FLOAT/DOUBLE's exact binary value as `[-]<mantissa>p<exponent>` ("0" for ±0, NULL stays NULL).

    A normal |x| = m·2^(e-52) with m an integer in [2^52, 2^53). FLOOR(LOG2(|x|)) may be one off next to a power
    of two, so e is that guess corrected by comparing |x| with the powers of two around it (exact comparisons;
    the guess is kept within [-1022, 1023] so that no power overflows). m is |x| scaled by 2^(52-e), in two
    steps below 1 so that no factor overflows; a subnormal is m·2^-1074. Every step is exact in IEEE 754 double
    arithmetic (a FLOAT widens to DOUBLE exactly), and the number of LOG2/POW calls is kept low: they are the
    cost of the whole digest.
    """
    magnitude = f"ABS({quoted})"
    guess = f"LEAST(GREATEST(FLOOR(LOG2({magnitude})), -1022), 1023)"
    exponent = (f"({guess} + ({guess} < 1023 AND {magnitude} >= POW(2, LEAST({guess} + 1, 1023))) "
                f"- ({magnitude} < POW(2, {guess})))")
    mantissa = (
        f"CASE WHEN {magnitude} < {_MIN_NORMAL} THEN {magnitude} * {_TWO_537} * {_TWO_537} "
        f"WHEN {magnitude} < 1 THEN {magnitude} * {_TWO_200} * POW(2, -148 - {exponent}) "
        f"ELSE {magnitude} * POW(2, 52 - {exponent}) END"
    )
    power = f"CASE WHEN {magnitude} < {_MIN_NORMAL} THEN -1074 ELSE {exponent} - 52 END"
    return (
        f"CASE WHEN {quoted} = 0 THEN '0' ELSE CONCAT(IF({quoted} < 0, '-', ''), "
        f"CAST(CAST({mantissa} AS UNSIGNED) AS CHAR), 'p', CAST(CAST({power} AS SIGNED) AS CHAR)) END"
    )


def _spark_exact_float(column: Column) -> Column:
    """`_mysql_exact_float` in Spark, step for step: the same text for the same value. NaN and ±Infinity (which
    MySQL cannot hold) get texts MySQL never produces."""
    from pyspark.sql import functions as F

    value = column.cast("double")
    magnitude = F.abs(value)
    guess = F.least(F.greatest(F.floor(F.log2(magnitude)), F.lit(-1022)), F.lit(1023))
    above = ((guess < 1023) & (magnitude >= F.pow(F.lit(2.0), F.least(guess + 1, F.lit(1023))))).cast("int")
    below = (magnitude < F.pow(F.lit(2.0), guess)).cast("int")
    exponent = guess + above - below
    subnormal = magnitude < F.lit(float.fromhex("0x1p-1022"))
    mantissa = (
        F.when(subnormal, magnitude * F.lit(2.0**537) * F.lit(2.0**537))
        .when(magnitude < 1, magnitude * F.lit(2.0**200) * F.pow(F.lit(2.0), -148 - exponent))
        .otherwise(magnitude * F.pow(F.lit(2.0), 52 - exponent))
    )
    power = F.when(subnormal, F.lit(-1074)).otherwise(exponent - 52)
    exact = F.concat(
        F.when(value < 0, F.lit("-")).otherwise(F.lit("")),
        mantissa.cast("bigint").cast("string"), F.lit("p"), power.cast("bigint").cast("string"),
    )
    return (
        F.when(F.isnan(value), F.lit("NaN"))
        .when(magnitude == F.lit(float("inf")), F.when(value < 0, F.lit("-Inf")).otherwise(F.lit("Inf")))
        .when(value == 0, F.lit("0"))
        .otherwise(exact)
    )


def mysql_text(column: ColumnInfo) -> str:
    """SQL giving the canonical text of a column's value as bytes (NULL stays NULL)."""
    quoted = quote_identifier(column.name)
    kind = column.data_type.lower()
    target = spark_type_ddl(column)
    if target in _FLOAT_TARGETS:
        text = _mysql_exact_float(quoted)
    elif kind in _LONG_KINDS:
        text = f"MD5({quoted})" if target == "binary" else f"MD5(CONVERT({quoted} USING utf8mb4))"
    elif kind in ("bit", "year"):
        text = f"CAST(CAST({quoted} AS UNSIGNED) AS CHAR)"
    elif target == "binary":
        text = f"HEX({quoted})"
    elif target in ("timestamp", "timestamp_ntz"):
        text = f"DATE_FORMAT({quoted}, '%Y-%m-%d %H:%i:%s.%f')"
    elif kind in _TEXT_KINDS:
        text = f"CONVERT({quoted} USING utf8mb4)"
    else:
        text = f"CAST({quoted} AS CHAR)"
    if kind in TEXT_TRANSFERRED_TEMPORALS:
        # A zero or partial date ('0000-00-00', '2024-00-10', year 0000) lands as NULL on both roads under
        # `source.zero_dates: null` (and stops the table under `error`), so the source's side reads it as NULL too:
        # otherwise every such row would be reported as drift that no re-snapshot could remove.
        text = f"IF(YEAR({quoted}) = 0 OR MONTH({quoted}) = 0 OR DAYOFMONTH({quoted}) = 0, NULL, {text})"
    return f"CAST({text} AS BINARY)"


def _self_delimited(column: ColumnInfo) -> bool:
    """The column's text has an alphabet without ';' (an exact float, an MD5): a terminator delimits it, and the
    text is computed once rather than twice (once more for its length)."""
    return spark_type_ddl(column) in _FLOAT_TARGETS or column.data_type.lower() in _LONG_KINDS


def mysql_row_text(columns: list[ColumnInfo]) -> str:
    """Length-prefixed (or terminated) values, so no value can shift into its neighbour."""
    fields = [
        f"IFNULL(CONCAT({mysql_text(c)}, ';'), '{_NULL_MARK}')" if _self_delimited(c)
        else f"IFNULL(CONCAT(LENGTH({mysql_text(c)}), ':', {mysql_text(c)}), '{_NULL_MARK}')"
        for c in columns
    ]
    return f"CONCAT({', '.join(fields)})" if fields else "''"


def mysql_digest(columns: list[ColumnInfo]) -> str:
    return f"CAST(CONV(LEFT(MD5({mysql_row_text(columns)}), 15), 16, 10) AS UNSIGNED)"


def spark_text(column: ColumnInfo) -> Column:
    from pyspark.sql import functions as F

    value = F.col(quote_identifier(column.name))
    target = spark_type_ddl(column)
    if target in _FLOAT_TARGETS:
        return _spark_exact_float(value)
    if column.data_type.lower() in _LONG_KINDS:
        return F.md5(value)  # a string's UTF-8 bytes, or the bytes of a binary
    if target == "binary":
        return F.hex(value)
    if target in ("timestamp", "timestamp_ntz"):
        return F.date_format(value, "yyyy-MM-dd HH:mm:ss.SSSSSS")
    if target == "string":
        return value
    return value.cast("string")


def spark_row_text(columns: list[ColumnInfo]) -> Column:
    from pyspark.sql import functions as F

    fields = [
        F.coalesce(F.concat(spark_text(c), F.lit(";")), F.lit(_NULL_MARK)) if _self_delimited(c)
        else F.coalesce(F.concat(F.octet_length(spark_text(c)).cast("string"), F.lit(":"), spark_text(c)),
                        F.lit(_NULL_MARK))
        for c in columns
    ]
    return F.concat(*fields) if fields else F.lit("")


def spark_digest(columns: list[ColumnInfo]) -> Column:
    from pyspark.sql import functions as F

    return F.conv(F.substring(F.md5(spark_row_text(columns)), 1, 15), 16, 10).cast("decimal(38,0)")


__all__ = ["mysql_digest", "mysql_row_text", "mysql_text", "spark_digest", "spark_row_text", "spark_text"]
