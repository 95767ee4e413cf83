"""Column types, edge values and the two independent readers of the differential fuzzer (bench/fuzz/fuzz.py).

Generation: `ColumnKind`s know their DDL and draw SQL literals from a `random.Random`, edge values first.
Comparison: both sides are brought to one canonical Python value per column, chosen from what the
*server* says the column is now (information_schema), never from binlake's own type mapping:

- the source is read over PyMySQL's text protocol with every value cast to text by the server
  (`CAST(c AS CHAR)`, `HEX(c)`, `CONVERT(c USING utf8mb4)`), so the server's rendering is the truth;
- Delta is read with the `deltalake` package's DataFusion scan (it applies deletion vectors).
"""

from __future__ import annotations

import datetime as dt
import json
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pymysql.converters import escape_string

# -- generation ---------------------------------------------------------------------------------


def quote(text: str) -> str:
    return "'" + escape_string(text) + "'"


@dataclass(frozen=True)
class ColumnKind:
    """One column type the fuzzer can create, and how to draw a literal for it."""

    name: str
    ddl: str
    draw: Callable[[random.Random], str]
    #: May be used in ADD INDEX without a prefix length.
    indexable: bool = True


def _int_kind(name: str, bits: int, unsigned: bool) -> ColumnKind:
    low, high = (0, 2**bits - 1) if unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    edges = sorted({low, high, 0, 1, low + 1, high - 1} | ({-1} if not unsigned else set()))

    def draw(rng: random.Random) -> str:
        return str(rng.choice(edges) if rng.random() < 0.4 else rng.randint(low, high))

    return ColumnKind(name, f"{name.split('_')[0].upper()}{' UNSIGNED' if unsigned else ''}", draw)


def _decimal_kind(precision: int, scale: int) -> ColumnKind:
    whole = precision - scale

    def draw(rng: random.Random) -> str:
        choice = rng.random()
        if choice < 0.2:  # the largest magnitude, all nines
            digits_whole, digits_frac = "9" * whole, "9" * scale
        elif choice < 0.3:  # the smallest step
            digits_whole, digits_frac = "0", "0" * (scale - 1) + "1" if scale else ""
        else:
            digits_whole = str(rng.randint(0, 10**whole - 1)) if whole else "0"
            digits_frac = "".join(rng.choice("0123456789") for _ in range(scale))
        sign = "-" if rng.random() < 0.4 else ""
        return f"{sign}{digits_whole}" + (f".{digits_frac}" if scale else "")

    return ColumnKind(f"decimal_{precision}_{scale}", f"DECIMAL({precision},{scale})", draw)


_FLOAT32_EDGES = (3.4028234663852886e38, -3.4028234663852886e38, 1.1754943508222875e-38, 0.0, -0.0, 1.0,
                  0.10000000149011612, 16777217.0, -2.5)
_DOUBLE_EDGES = (1.7976931348623157e308, -1.7976931348623157e308, 2.2250738585072014e-308, 0.0, 0.1,
                 -0.30000000000000004, 9007199254740993.0, 1e-300, 123456789.12345679)


def _float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def _draw_float(rng: random.Random) -> str:
    if rng.random() < 0.4:
        return repr(rng.choice(_FLOAT32_EDGES))
    return repr(_float32(rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30)))


def _draw_double(rng: random.Random) -> str:
    if rng.random() < 0.4:
        return repr(rng.choice(_DOUBLE_EDGES))
    return repr(rng.uniform(-1, 1) * 10 ** rng.randint(-300, 300))


def _bit_kind(width: int) -> ColumnKind:
    edges = [0, 1, 2**width - 1, 2 ** (width - 1)]
    return ColumnKind(f"bit_{width}", f"BIT({width})",
                      lambda rng: str(rng.choice(edges) if rng.random() < 0.5 else rng.randint(0, 2**width - 1)))


def _fraction(rng: random.Random, fsp: int) -> str:
    if not fsp:
        return ""
    edge = rng.random()
    if edge < 0.2:
        digits = "9" * fsp
    elif edge < 0.35:
        digits = "0" * (fsp - 1) + "1"
    elif edge < 0.45 and fsp >= 2:
        digits = "25" + "0" * (fsp - 2)
    else:
        digits = "".join(rng.choice("0123456789") for _ in range(fsp))
    return "." + digits


_ZERO_DATES = ("0000-00-00", "2024-00-10", "2024-05-00", "0000-01-01")
_EDGE_DATES = ("1000-01-01", "9999-12-31", "0001-01-01", "1582-10-10", "1582-10-04", "1900-02-28", "2000-02-29",
               "1969-12-31", "1970-01-01")


def _date(rng: random.Random, *, zero: bool = True) -> str:
    roll = rng.random()
    if zero and roll < 0.1:
        return rng.choice(_ZERO_DATES)
    if roll < 0.3:
        return rng.choice(_EDGE_DATES)
    day = dt.date(1000, 1, 1) + dt.timedelta(days=rng.randint(0, (dt.date(9999, 12, 31) - dt.date(1000, 1, 1)).days))
    return day.isoformat()


def _clock(rng: random.Random) -> str:
    if rng.random() < 0.2:
        return rng.choice(("00:00:00", "23:59:59", "12:00:00"))
    return f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"


def _datetime_kind(fsp: int) -> ColumnKind:
    def draw(rng: random.Random) -> str:
        if rng.random() < 0.08:
            return quote("0000-00-00 00:00:00")
        return quote(f"{_date(rng)} {_clock(rng)}{_fraction(rng, fsp)}")

    return ColumnKind(f"datetime_{fsp}", f"DATETIME({fsp})" if fsp else "DATETIME", draw)


_TS_LOW = dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)
_TS_HIGH = dt.datetime(2038, 1, 19, 3, 14, 7, tzinfo=dt.UTC)


def _timestamp_kind(fsp: int) -> ColumnKind:
    def draw(rng: random.Random) -> str:
        roll = rng.random()
        if roll < 0.08:
            return quote("0000-00-00 00:00:00")
        if roll < 0.25:
            moment = rng.choice((_TS_LOW, _TS_HIGH))
        else:
            moment = _TS_LOW + dt.timedelta(seconds=rng.randint(0, int((_TS_HIGH - _TS_LOW).total_seconds())))
        return quote(f"{moment:%Y-%m-%d %H:%M:%S}{_fraction(rng, fsp)}")

    # NULL DEFAULT NULL: MariaDB gives a first TIMESTAMP column ON UPDATE CURRENT_TIMESTAMP otherwise.
    return ColumnKind(f"timestamp_{fsp}", f"TIMESTAMP({fsp}) NULL DEFAULT NULL" if fsp else
                      "TIMESTAMP NULL DEFAULT NULL", draw)


def _time_kind(fsp: int) -> ColumnKind:
    edges = ["-838:59:59", "838:59:59", "00:00:00", "-00:00:01", "123:45:06", "-12:00:00"]
    if fsp:
        edges += ["-838:59:59." + "9" * fsp, "838:59:59." + "9" * fsp, "-00:00:00." + "0" * (fsp - 1) + "1",
                  "-00:00:01." + ("25" + "0" * (fsp - 2) if fsp >= 2 else "2"), "-00:00:00.5" + "0" * (fsp - 1)]

    def draw(rng: random.Random) -> str:
        if rng.random() < 0.45:
            return quote(rng.choice(edges))
        sign = "-" if rng.random() < 0.5 else ""
        hours = rng.choice((0, 0, 1, 24, rng.randint(0, 838)))
        return quote(f"{sign}{hours:02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}{_fraction(rng, fsp)}")

    return ColumnKind(f"time_{fsp}", f"TIME({fsp})" if fsp else "TIME", draw)


def _year_draw(rng: random.Random) -> str:
    return str(rng.choice((1901, 2155, 0, 2000, 1970, rng.randint(1901, 2155))))


#: Characters tried in every character set; `charset_alphabets` keeps those the server round-trips.
UNICODE_POOL = (
    "a", "Z", "0", " ", "'", '"', "\\", "%", "_", "\t", "\n", "é", "ß", "ü", "Ø", "ñ", "€", "£", "¥", "©", "°",
    "Ж", "я", "Ω", "λ", "א", "ש", "ع", "ก", "中", "文", "日", "本", "語", "表", "ソ", "予", "能", "十", "功", "許",
    "蓋", "乗", "ｱ", "～", "￥", "한", "국", "ㄱ", "Ā", "ő", "Ł", "ţ", "Ǳ", "\u00a0", "\u0081", "\u008d", "\u008f",
    "\u0090", "\u009d", "\u00ad", "\u200b", "\ufeff", "😀", "🎉", "𝄞", "👍🏽", "e\u0301", "\x00",
)


def _text_kind(kind: str, charset: str, alphabet: tuple[str, ...]) -> ColumnKind:
    length = {"char": 12, "varchar": 40, "tinytext": 60, "text": 300, "mediumtext": 300}[kind]
    ddl = {"char": "CHAR(12)", "varchar": "VARCHAR(40)"}.get(kind, kind.upper())

    def draw(rng: random.Random) -> str:
        size = rng.choice((0, 1, 2, 5, rng.randint(0, length)))
        text = "".join(rng.choice(alphabet) for _ in range(size))
        if kind == "char":
            text = text.rstrip(" ")  # CHAR drops trailing spaces on the server; keep the value exact
        elif rng.random() < 0.1:
            text += " "
        while len(text) > length:  # a multi-character draw ("e" + combining accent) may overflow
            text = text[:-1]
        return quote(text)

    return ColumnKind(f"{kind}_{charset}", f"{ddl} CHARACTER SET {charset}", draw,
                      indexable=kind in ("char", "varchar"))


def _binary_kind(kind: str) -> ColumnKind:
    length = {"binary": 8, "varbinary": 40, "tinyblob": 60, "blob": 300}[kind]
    ddl = {"binary": "BINARY(8)", "varbinary": "VARBINARY(40)"}.get(kind, kind.upper())

    def draw(rng: random.Random) -> str:
        size = rng.choice((0, 1, rng.randint(0, length), length))
        data = bytes(rng.choice((0, 0x20, 0xFF, 0x80, rng.randint(0, 255))) for _ in range(size))
        return "X'" + data.hex().upper() + "'"

    return ColumnKind(kind, ddl, draw, indexable=kind in ("binary", "varbinary"))


_ENUM = ("a", "b c", "é", "it''s", "Z")
_SET = ("x", "y", "zz", "ü")


def _enum_draw(rng: random.Random) -> str:
    return quote(rng.choice(_ENUM).replace("''", "'"))


def _set_draw(rng: random.Random) -> str:
    return quote(",".join(member for member in _SET if rng.random() < 0.4))  # '' is the empty set


def _json_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth < 3 and roll < 0.25:
        return {rng.choice(("a", "b", "ключ", "😀", "x y", "")): _json_value(rng, depth + 1)
                for _ in range(rng.randint(0, 3))}
    if depth < 3 and roll < 0.45:
        return [_json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return rng.choice((None, True, False, 0, -1, 2**53 + 1, 18446744073709551615, 1.5, -0.25, 1e300, "",
                       "text", "quote\"back\\slash", "é€😀", "\u0000", "line\nbreak"))


def _json_draw(rng: random.Random) -> str:
    return quote(json.dumps(_json_value(rng), ensure_ascii=rng.random() < 0.3))


def column_kinds(alphabets: dict[str, tuple[str, ...]], rng: random.Random) -> list[ColumnKind]:
    """Every kind the fuzzer knows; text kinds in the character sets the server supports."""
    kinds: list[ColumnKind] = []
    for name, bits in (("tinyint", 8), ("smallint", 16), ("mediumint", 24), ("int", 32), ("bigint", 64)):
        kinds.append(_int_kind(name, bits, False))
        kinds.append(_int_kind(name + "_unsigned", bits, True))
    for precision, scale in ((1, 0), (10, 2), (18, 9), (38, 10), (38, 0), (39, 5), (65, 30), (65, 0), (20, 20)):
        kinds.append(_decimal_kind(precision, scale))
    kinds.append(ColumnKind("float", "FLOAT", _draw_float))
    kinds.append(ColumnKind("double", "DOUBLE", _draw_double))
    kinds += [_bit_kind(width) for width in (1, 7, 8, 17, 63, 64)]
    kinds.append(ColumnKind("date", "DATE", lambda rng: quote(_date(rng))))
    for fsp in range(7):
        kinds += [_datetime_kind(fsp), _timestamp_kind(fsp), _time_kind(fsp)]
    kinds.append(ColumnKind("year", "YEAR", _year_draw))
    for charset, alphabet in sorted(alphabets.items()):
        weight = 3 if charset in ("utf8mb4", "latin1") else 1
        for _ in range(weight):
            kinds.append(_text_kind(rng.choice(("char", "varchar", "varchar", "tinytext", "text")), charset, alphabet))
    kinds += [_binary_kind(kind) for kind in ("binary", "varbinary", "tinyblob", "blob")]
    enum_ddl = ",".join(f"'{member}'" for member in _ENUM)
    set_ddl = ",".join(f"'{member}'" for member in _SET)
    kinds.append(ColumnKind("enum", f"ENUM({enum_ddl})", _enum_draw))
    kinds.append(ColumnKind("set", f"SET({set_ddl})", _set_draw))
    kinds.append(ColumnKind("json", "JSON", _json_draw, indexable=False))
    return kinds


def charset_alphabets(connection: Any, charsets: list[str]) -> dict[str, tuple[str, ...]]:
    """For each character set, the characters the server stores and gives back unchanged.

    Single-byte sets contribute every byte 0x20–0xFF the server maps to a character (for MySQL's latin1
    that includes 0x81, 0x8D, 0x8F, 0x90, 0x9D, which Python's cp1252 lacks); every set contributes the
    characters of `UNICODE_POOL` it can hold. The server decides, not a Python codec.
    """
    alphabets: dict[str, tuple[str, ...]] = {}
    with connection.cursor() as cursor:
        for charset in charsets:
            found: list[str] = []
            cursor.execute("SELECT MAXLEN FROM information_schema.CHARACTER_SETS WHERE CHARACTER_SET_NAME = %s",
                           (charset,))
            maxlen = int(cursor.fetchone()[0])
            if maxlen == 1:
                expressions = ", ".join(
                    f"HEX(CONVERT(CONVERT(X'{byte:02X}' USING {charset}) USING utf8mb4))" for byte in range(0x20, 256)
                )
                cursor.execute(f"SELECT {expressions}")
                for byte, hexed in zip(range(0x20, 256), cursor.fetchone(), strict=True):
                    char = bytes.fromhex(hexed).decode("utf-8") if hexed else ""
                    if len(char) == 1 and (char != "?" or byte == 0x3F):
                        found.append(char)
            expressions = ", ".join(
                f"HEX(CONVERT(CONVERT({quote(char)} USING {charset}) USING utf8mb4))" for char in UNICODE_POOL
            )
            cursor.execute(f"SELECT {expressions}")
            for char, hexed in zip(UNICODE_POOL, cursor.fetchone(), strict=True):
                if hexed is not None and bytes.fromhex(hexed).decode("utf-8") == char and char not in found:
                    found.append(char)
            if len(found) >= 5:
                alphabets[charset] = tuple(found)
    return alphabets


# -- comparison ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceColumn:
    """A column as information_schema describes it at comparison time."""

    name: str
    data_type: str
    column_type: str
    fsp: int

    @property
    def select(self) -> str:
        """The expression that makes the server render the value as text."""
        quoted = f"`{self.name}`"
        kind = self.data_type
        if kind == "float":
            return f"CAST({quoted} AS DOUBLE)"
        if kind in ("bit", "year"):
            return f"CAST({quoted} AS UNSIGNED)"
        if kind in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
            return f"HEX({quoted})"
        if kind in ("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"):
            return f"CONVERT({quoted} USING utf8mb4)"
        return f"CAST({quoted} AS CHAR)"


_INTS = {"tinyint", "smallint", "mediumint", "int", "bigint", "bit", "year"}


def _is_zero_date(text: str) -> bool:
    day = text[:10]
    return day[:4] == "0000" or day[5:7] == "00" or day[8:10] == "00"


def canonical_source(column: SourceColumn, text: str | None) -> Any:
    if text is None:
        return None
    kind = column.data_type
    if kind in _INTS:
        return int(text)
    if kind == "decimal":
        return Decimal(text)
    if kind == "float":
        return _float32(float(text))
    if kind == "double":
        return float(text)
    if kind in ("date", "datetime", "timestamp"):
        return None if _is_zero_date(text) else text
    return text


def _clock_text(value: dt.datetime, fsp: int) -> str:
    text = f"{value.year:04d}-{value.month:02d}-{value.day:02d} {value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    return text + ("." + f"{value.microsecond:06d}"[:fsp] if fsp else "")


def canonical_delta(column: SourceColumn, value: Any) -> Any:
    if value is None:
        return None
    kind = column.data_type
    if kind in _INTS:
        return int(value)
    if kind == "decimal":
        return Decimal(value)
    if kind == "float":
        return _float32(float(value))
    if kind == "double":
        return float(value)
    if kind == "date":
        return f"{value.year:04d}-{value.month:02d}-{value.day:02d}" if isinstance(value, dt.date) else str(value)
    if kind == "datetime" and isinstance(value, dt.datetime):
        return _clock_text(value, column.fsp)
    if kind == "timestamp" and isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC)
        return _clock_text(value, column.fsp)
    if isinstance(value, bytes):
        return value.hex().upper()
    return value if isinstance(value, str) else repr(value)


def same(left: Any, right: Any) -> bool:
    """Equality that tells -0.0 from 0.0 apart only where the server does too (it does not)."""
    if isinstance(left, float) and isinstance(right, float):
        return left == right or (left != left and right != right)
    return type(left) is type(right) and left == right


__all__ = ["ColumnKind", "SourceColumn", "canonical_delta", "canonical_source", "charset_alphabets",
           "column_kinds", "quote", "same"]
