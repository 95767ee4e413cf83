"""Generate cdc_lib/model/charset_tables.py from a MariaDB server: what it shows for every code of every charset.

    python -m tools.charset_tables --socket /path/to/mysqld.sock [--write]

For each charset in SHOW CHARACTER SET the server is asked, for every candidate code (every byte; every
two-byte code with a high lead byte; EUC's three-byte 0x8F codes; every UCS-2/UTF-16 unit; every BMP code
point and samples beyond for UTF-8/UTF-32), whether the code is well formed (`CONVERT(code USING cs)` keeps
its bytes — the server refuses anything else on INSERT) and what `CONVERT(… USING utf8mb4)` shows for it.

- A single-byte charset gets its 256-character table straight from the server.
- A multi-byte charset gets the Python codec that agrees with the server on most codes, plus fix-ups for the
  codes where it does not: codes the codec refuses (decoded through an error handler) and codes it decodes
  to another character (translated afterwards — only possible when no other code decodes to that character).
  A charset no such codec + fix-ups can reproduce is left out, and binlake refuses its columns.

With --write the tables replace cdc_lib/model/charset_tables.py (the whole module: it is generated, and
`cdc_lib.model.charsets` decodes with it); without, it prints a summary.
tests/integration/test_charsets.py checks the result against the suite's server, code by code.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pymysql

MULTI_BYTE_CANDIDATES: dict[str, tuple[str, ...]] = {
    "big5": ("big5", "cp950", "big5hkscs"),
    "cp932": ("cp932", "shift_jis"),
    "eucjpms": ("euc_jp", "euc_jis_2004"),
    "euckr": ("cp949", "euc_kr"),
    "gb2312": ("gb2312", "gbk"),
    "gbk": ("gbk", "cp936", "gb18030"),
    "sjis": ("shift_jis", "cp932"),
    "ujis": ("euc_jp", "euc_jis_2004"),
}
# Decoded by a Python codec alone (`_CODEC_ONLY` in cdc_lib/model/charsets.py); the test proves them code by code.
CODEC_ONLY = ("ucs2", "utf16", "utf16le", "utf32", "utf8mb3", "utf8mb4")
#: The generated module (`--write` replaces it whole).
TARGET = Path(__file__).resolve().parent.parent / "cdc_lib" / "model" / "charset_tables.py"
HEADER = "\n".join([
    '"""The server\'s charset tables, which `cdc_lib.model.charsets` decodes with. GENERATED: do not edit by hand.',
    "",
    "What a MariaDB server shows for every code of every charset: `python -m tools.charset_tables --socket",
    "/path/to/mysqld.sock --write` rewrites this module; tests/integration/test_charsets.py checks it code by code",
    "against the test suite's server.",
    '"""',
    "",
    "",
])


def candidate_codes(charset: str) -> list[bytes]:
    """Every code of `charset` worth asking the server about."""
    if charset in ("ucs2", "utf16", "utf16le"):
        units = [bytes([high, low]) for high in range(256) for low in range(256)]
        if charset == "utf16le":
            units = [unit[::-1] for unit in units]
        pairs = [chr(point).encode("utf_16_le" if charset == "utf16le" else "utf_16_be")
                 for point in _supplementary_samples()]
        return units + pairs
    if charset in ("utf8mb3", "utf8mb4", "utf32"):
        points = list(range(0x10000)) + (_supplementary_samples() if charset != "utf8mb3" else [])
        codec = "utf_32_be" if charset == "utf32" else "utf_8"
        codes = [chr(point).encode(codec, "surrogatepass") for point in points]
        if charset == "utf32":
            codes += [(0x110000).to_bytes(4, "big"), (0xFFFFFFFF).to_bytes(4, "big")]
        return codes
    codes = [bytes([byte]) for byte in range(256)]
    if charset in MULTI_BYTE_CANDIDATES or charset not in CODEC_ONLY:
        codes += [bytes([lead, trail]) for lead in range(0x80, 0x100) for trail in range(256)]
    if charset in ("ujis", "eucjpms"):
        codes += [bytes([0x8F, first, second]) for first in range(0xA1, 0xFF) for second in range(0xA1, 0xFF)]
    return codes


def _supplementary_samples() -> list[int]:
    return [*range(0x10000, 0x10100), *range(0x1F600, 0x1F650), 0x20000, 0x2A6D6, 0xE0001, 0xFFFFD, 0x10FFFF]


def server_views(connection: Any, charsets: list[str]) -> dict[str, dict[bytes, str]]:
    """For each charset, its well-formed codes among every charset's candidates → the text the server shows."""
    codes = sorted({code for charset in charsets for code in candidate_codes(charset)})
    views = {}
    with connection.cursor() as cursor:
        cursor.execute("CREATE DATABASE IF NOT EXISTS binlake_charsets")
        cursor.execute("DROP TABLE IF EXISTS binlake_charsets.codes")
        cursor.execute("CREATE TABLE binlake_charsets.codes (code VARBINARY(4) PRIMARY KEY)")
        cursor.executemany("INSERT INTO binlake_charsets.codes VALUES (%s)", [(code,) for code in codes])
        for charset in charsets:
            cursor.execute(
                # As hex: MariaDB's UTF-8 charsets keep surrogate code points (ED A0 80), not valid UTF-8.
                f"SELECT code, HEX(CONVERT(CONVERT(code USING {charset}) USING utf8mb4)) "
                "FROM binlake_charsets.codes "
                # Well formed, and one character: a longer code that is two characters is not a code.
                f"WHERE HEX(CONVERT(code USING {charset})) = HEX(code) "
                f"AND CHAR_LENGTH(CONVERT(code USING {charset})) = 1"
            )
            views[charset] = {bytes(code): bytes.fromhex(text).decode("utf_8", "surrogatepass")
                              for code, text in cursor.fetchall()}
        cursor.execute("DROP DATABASE binlake_charsets")
    return views


def single_byte_table(view: dict[bytes, str]) -> str:
    """The server's character for every byte; '?' (what the server shows) for bytes it never stores."""
    return "".join(view.get(bytes([byte]), "?") for byte in range(256))


def fit_codec(view: dict[bytes, str], codec: str) -> dict[bytes, str]:
    """The codes `codec` refuses or decodes to other text than the server → the server's text."""
    fixed: dict[bytes, str] = {}
    for code, text in view.items():
        try:
            ours = code.decode(codec)
        except UnicodeDecodeError:
            ours = None
        if ours != text:
            fixed[code] = text
    return fixed


def _decoded_differently(fixed: dict[bytes, str], codec: str) -> int:
    count = 0
    for code in fixed:
        try:
            code.decode(codec)
        except UnicodeDecodeError:
            continue
        count += 1
    return count


def lead_bytes(view: dict[bytes, str]) -> tuple[bytes, bytes] | None:
    """(two-byte, three-byte) lead bytes, or None when a code's length does not follow from its lead byte."""
    by_length: dict[int, set[int]] = {1: set(), 2: set(), 3: set()}
    for code in view:
        by_length[len(code)].add(code[0])
    if by_length[1] & by_length[2] or by_length[1] & by_length[3] or by_length[2] & by_length[3]:
        return None
    return bytes(sorted(by_length[2])), bytes(sorted(by_length[3]))


def runs(fixed: dict[bytes, str]) -> list[tuple[int, int, str, int]]:
    """(first code, last code, text of the first, step): step 0 repeats the text, 1 counts its code point up."""
    found: list[tuple[int, int, str, int]] = []
    for code, text in sorted((int.from_bytes(code, "big"), text) for code, text in fixed.items()):
        if found:
            first, last, start, step = found[-1]
            if code == last + 1 and len(text) == 1 == len(start):
                offset = ord(text) - ord(start)
                if step == 0 and offset == 0 or step == 1 and offset == code - first or last == first and offset == 1:
                    found[-1] = (first, code, start, 0 if offset == 0 else 1)
                    continue
        found.append((code, code, text, 0))
    return found


def _byte_spans(values: bytes) -> str:
    spans = ", ".join(f"*range(0x{first:02X}, 0x{last + 1:02X})" for first, last in ranges(list(values)))
    return f"bytes([{spans}])"


def ranges(codes: list[int]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for code in sorted(codes):
        if spans and spans[-1][1] == code - 1:
            spans[-1] = (spans[-1][0], code)
        else:
            spans.append((code, code))
    return spans


def render(single: dict[str, str], multi: dict[str, tuple[str, tuple[bytes, bytes], dict[bytes, str]]],
           unproven: dict[str, str], server: str) -> str:
    lines = [f"# Derived from {server}. Do not edit by hand: rerun the script.",
             "SINGLE_BYTE: dict[str, str] = {"]
    for name in sorted(single):
        lines.append(f"    {name!r}: (")
        table = single[name]
        for start in range(0, 256, 16):
            lines.append(f"        {table[start:start + 16]!r}")
        lines.append("    ),")
    lines += ["}", "# charset: (Python codec, (two-byte lead bytes, three-byte lead bytes),",
              "#           the codes the codec gets wrong as runs (first, last, the server's text for the first,",
              "#           step): step 0: every code shows that text; step 1: each next code the next code point)",
              "MULTI_BYTE: dict[str, tuple[str, tuple[bytes, bytes], tuple[tuple[int, int, str, int], ...]]] = {"]
    for name in sorted(multi):
        codec, (lead2, lead3), fixed = multi[name]
        lines.append(f"    {name!r}: (")
        lines.append(f"        {codec!r},")
        lines.append(f"        ({_byte_spans(lead2)}, {_byte_spans(lead3)}),")
        lines.append("        (")
        found = [f"(0x{first:X}, 0x{last:X}, {text!r}, {step})" for first, last, text, step in runs(fixed)]
        line = ""
        for run in found:
            if len(line) + len(run) > 100:
                lines.append(f"            {line.rstrip()}")
                line = ""
            line += f"{run}, "
        lines.append(f"            {line.rstrip()}")
        lines.append("        ),")
        lines.append("    ),")
    lines += ["}", "UNPROVEN: dict[str, str] = {"]
    lines += [f"    {name!r}: {reason!r}," for name, reason in sorted(unproven.items())]
    lines += ["}"]
    return HEADER + "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--user", default="root")
    parser.add_argument("--write", action="store_true")
    options = parser.parse_args()
    connection = pymysql.connect(unix_socket=options.socket, user=options.user, charset="utf8mb4", autocommit=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT VERSION()")
        server = f"MariaDB {cursor.fetchone()[0]}"
        cursor.execute("SHOW CHARACTER SET")
        charsets = sorted((str(row[0]), int(row[3])) for row in cursor.fetchall())
    single: dict[str, str] = {}
    multi: dict[str, tuple[str, tuple[bytes, bytes], dict[bytes, str]]] = {}
    unproven: dict[str, str] = {}
    views = server_views(connection, [charset for charset, _ in charsets if charset != "binary"])
    for charset, width in charsets:
        if charset == "binary" or charset in CODEC_ONLY:
            continue
        view = views[charset]
        if width == 1:
            single[charset] = single_byte_table(view)
            print(f"{charset}: single byte, {len(view)} well-formed bytes")
            continue
        leads = lead_bytes(view)
        codecs_ = MULTI_BYTE_CANDIDATES.get(charset, ())
        if leads is None or not codecs_:
            unproven[charset] = "its codes cannot be split by lead byte" if codecs_ else "no Python codec is close"
            print(f"{charset}: UNPROVEN")
            continue
        # Fewest codes the codec decodes to other text (each is checked for in every value), then fewest fixes.
        fixed, codec = min(((fit_codec(view, codec), codec) for codec in codecs_),
                           key=lambda fit: (_decoded_differently(fit[0], fit[1]), len(fit[0])))
        multi[charset] = (codec, leads, fixed)
        print(f"{charset}: {codec}, {len(view)} well-formed codes, {len(fixed)} decoded from the table")
    module = render(single, multi, unproven, server)
    if options.write:
        TARGET.write_text(module)
        print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
