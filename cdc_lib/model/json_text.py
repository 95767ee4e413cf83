"""A JSON document as MySQL prints it (`CAST(col AS CHAR)`, `JSON_EXTRACT`): the text a JSON column lands as.

MySQL prints a document in one line (`Json_wrapper::to_string`): `", "` between members and cells, `": "` after a
key, members in their stored order (key length, then key bytes), strings escaped as `double_quote` escapes them
(`\\"`, `\\\\`, `\\b \\f \\n \\r \\t`, any other byte below 0x20 as `\\u00xx`; nothing else, so non-ASCII text stays
as it is), integers as they are, a double as `my_gcvt` writes it (shortest round-trip digits; `.0` added to a
whole number; the exponent without `+`), and the scalars binary JSON keeps as opaque values (DATE, TIME,
DATETIME, TIMESTAMP, DECIMAL, bytes) as `JsonScalarText`, already in MySQL's text (`cdc_lib.binlog.json_binary`
decodes them). Python's `json.dumps` differs on doubles (`1e+300`, `1e-05`) and knows no opaque value, so binlake
renders the text itself.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_NEEDS_ESCAPE = re.compile('[\x00-\x1f"\\\\]')
#: MY_GCVT_MAX_FIELD_WIDTH (DBL_DIG + 4 + max(5, MAX_DECPT_FOR_F_FORMAT)), the width MySQL prints JSON doubles in.
_GCVT_WIDTH = 34
#: MAX_DECPT_FOR_F_FORMAT (DBL_DIG): beyond it my_gcvt prefers `1e15` to `1000000000000000`.
_MAX_DECPT_FOR_F_FORMAT = 15


@dataclass(frozen=True)
class JsonScalarText:
    """A scalar held in binary JSON as an opaque value, as its exact JSON text (quoted where MySQL quotes it)."""

    text: str


@dataclass(frozen=True)
class MySqlJson:
    """A MySQL JSON column's value as decoded from binary JSON (`document` may itself be a string or null, which
    the text then quotes or spells out — unlike MariaDB's JSON, which is the text itself)."""

    document: Any


def mysql_json_text(value: Any) -> str:
    """`value` (a decoded document: dict, list, str, int, float, bool, None, JsonScalarText) as MySQL prints it.

    Keys and strings may also be bytes (UTF-8), as a partial update's inserted keys are (`json_diff`).
    """
    parts: list[str] = []
    _render(value, parts)
    return "".join(parts)


def _render(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(double_text(value))
    elif isinstance(value, (str, bytes)):
        out.append(_quoted(value))
    elif isinstance(value, JsonScalarText):
        out.append(value.text)
    elif isinstance(value, dict):
        out.append("{")
        for index, (key, item) in enumerate(value.items()):
            if index:
                out.append(", ")
            out.append(_quoted(key))
            out.append(": ")
            _render(item, out)
        out.append("}")
    elif isinstance(value, list):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(", ")
            _render(item, out)
        out.append("]")
    else:
        raise TypeError(f"a JSON document holds a {type(value).__name__}, which is no JSON value")


def _quoted(text: str | bytes) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="surrogateescape")
    if _NEEDS_ESCAPE.search(text) is None:
        return f'"{text}"'
    # json.dumps escapes exactly what MySQL's double_quote does once non-ASCII is left alone: the quote, the
    # backslash, \b \f \n \r \t by name and every other code below 0x20 as \u00xx in lowercase hex.
    return json.dumps(text, ensure_ascii=False)


def double_text(value: float) -> str:
    """A JSON double as MySQL prints it: `my_gcvt(d, MY_GCVT_ARG_DOUBLE, 34)`, then `.0` if it is a whole number.

    my_gcvt asks dtoa (mode 4, 34 digits) for the shortest digits that read back as the same double — the
    digits Python's `repr` gives — and places them in the 'f' or 'e' format by its own rules: 'e' beyond 15
    integer digits (unless they are all significant) or below 14 leading zeros, and when 'f' would not fit.
    """
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"a JSON double is {value}, which binary JSON cannot hold")
    negative = value < 0 or (value == 0 and str(value).startswith("-"))
    digits, decpt = _shortest_digits(abs(value))
    width = _GCVT_WIDTH - (1 if value < 0 else 0)
    length = len(digits)
    exp_len = 1 + (decpt >= 101 or decpt <= -99) + (decpt >= 11 or decpt <= -9)
    if decpt <= 0:
        f_length = length - decpt + 2
    elif decpt < length:
        f_length = length + 1
    else:
        f_length = decpt
    have_space = f_length <= width
    force_e = decpt <= 0 and width <= 2 - decpt and width >= 3 + exp_len
    fits_f = have_space or (
        decpt <= width and (decpt >= -1 or (decpt == -2 and (length > 1 or not force_e))) and not force_e)
    prefers_f = not have_space or (
        decpt >= -_MAX_DECPT_FOR_F_FORMAT + 1 and (decpt <= _MAX_DECPT_FOR_F_FORMAT or length > decpt))
    sign = "-" if negative else ""
    if fits_f and prefers_f:
        if decpt <= 0:
            text = "0." + "0" * -decpt + digits
        elif decpt < length:
            text = digits[:decpt] + "." + digits[decpt:]
        else:
            text = digits + "0" * (decpt - length)
    else:
        exponent = decpt - 1
        mantissa = digits[0] + ("." + digits[1:] if length > 1 else "")
        text = f"{mantissa}e{exponent}"
    text = sign + text
    if "." not in text and "e" not in text:
        text += ".0"
    return text


def _shortest_digits(value: float) -> tuple[str, int]:
    """The shortest significant digits that read back as `value` (≥ 0), and dtoa's decpt (the decimal point's
    place: value = 0.DIGITS × 10^decpt). Zero is ("0", 1), as dtoa gives it."""
    if value == 0:
        return "0", 1
    mantissa, _, exponent = repr(value).partition("e")
    whole, _, fraction = mantissa.partition(".")
    if fraction == "0":
        fraction = ""
    every = whole + fraction
    significant = every.lstrip("0")
    decpt = len(whole) - (len(every) - len(significant)) + int(exponent or 0)
    return significant.rstrip("0"), decpt
