"""MySQL's text of a JSON double, written for the tests from MySQL's source, apart from dblog's code.

sql-common/json_dom.cc (`wrapper_to_string`, case J_DOUBLE) prints a double inside a JSON value with
`my_gcvt(d, MY_GCVT_ARG_DOUBLE, MY_GCVT_MAX_FIELD_WIDTH, ...)` and appends ".0" when the text has no '.'
and no 'e'. `my_gcvt` below follows strings/dtoa.cc step by step (the `have_space`, `force_e_format` and
MAX_DECPT_FOR_F_FORMAT tests of its format choice, for any field width); include/mysql/strings/dtoa.h:
MAX_DECPT_FOR_F_FORMAT = DBL_DIG = 15, MY_GCVT_MAX_FIELD_WIDTH = DBL_DIG + 4 + max(5, 15) = 34.

Its digits are dtoa's in mode 4 with `width` digits: the shortest decimal that reads back as the same double
(the closest one when several are as short, an even last digit on a tie), searched here digit count by
digit count with exact decimal arithmetic, not taken from Python's repr. Widths below 17 would make dtoa
round to fewer digits, which MySQL's JSON printing never asks for, so they are not modelled.
"""

from __future__ import annotations

import json
import math
import struct
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext
from typing import Any

DBL_DIG = 15
MAX_DECPT_FOR_F_FORMAT = DBL_DIG
MY_GCVT_MAX_FIELD_WIDTH = DBL_DIG + 4 + max(5, MAX_DECPT_FOR_F_FORMAT)


def shortest_digits(x: float) -> tuple[str, int]:
    """dtoa's digits and decpt of |x| > 0 (x = 0.digits * 10**decpt): for k = 1, 2, ... the k-digit
    decimals just below and just above x; the first k where one reads back as x wins, the closer one
    if both do."""
    exact = Decimal(abs(x))
    with localcontext() as context:
        context.prec = 800
        exponent10 = exact.adjusted()  # exact = d.ddd * 10**exponent10
        for k in range(1, 18):
            quantum = Decimal(1).scaleb(exponent10 - k + 1)
            below = exact.quantize(quantum, rounding=ROUND_FLOOR)
            above = exact.quantize(quantum, rounding=ROUND_CEILING)
            fits = [c for c in {below, above} if c != 0 and float(c) == abs(x)]
            if fits:
                best = min(fits, key=lambda c: (abs(c - exact), int(c.scaleb(-c.as_tuple().exponent)) % 2))
                sign, digits, exp = best.as_tuple()
                text = "".join(map(str, digits)).rstrip("0")
                return text, len(digits) + exp
    raise AssertionError(f"no 17-digit decimal reads back as {x!r}")


def my_gcvt(x: float, width: int) -> str:
    """strings/dtoa.cc my_gcvt(x, MY_GCVT_ARG_DOUBLE, width, ...) for widths that hold 17 digits."""
    if x < 0.0:
        width -= 1  # "We want to remove '-' from equations early"
    negative = math.copysign(1.0, x) < 0  # dtoa's sign, set for -0.0 too
    if x == 0.0:
        digits, decpt = "0", 1  # dtoa: "0" with decpt 1
    else:
        digits, decpt = shortest_digits(x)
    length = len(digits)
    exp_len = 1 + (decpt >= 101 or decpt <= -99) + (decpt >= 11 or decpt <= -9)
    if decpt <= 0:
        f_length = length - decpt + 2
    elif decpt < length:
        f_length = length + 1
    else:
        f_length = decpt
    have_space = f_length <= width
    force_e_format = decpt <= 0 and width <= 2 - decpt and width >= 3 + exp_len
    use_f = (have_space or ((decpt <= width and (decpt >= -1 or (decpt == -2 and (length > 1 or not force_e_format))))
                            and not force_e_format)) \
        and (not have_space or (decpt >= -MAX_DECPT_FOR_F_FORMAT + 1
                                and (decpt <= MAX_DECPT_FOR_F_FORMAT or length > decpt)))
    out = "-" if negative else ""
    if use_f:
        assert width - ((decpt < length) + (1 - decpt if decpt <= 0 else 0)) >= length, "no digit is cut"
        if decpt <= 0:
            out += "0." + "0" * -decpt
        for index, digit in enumerate(digits, start=1):
            out += digit
            if index == decpt and index < length:
                out += "."
        out += "0" * max(0, decpt - length)
        return out
    exponent = decpt - 1
    out += digits[0] + ("." + digits[1:] if length > 1 else "") + "e"
    return out + ("-" if exponent < 0 else "") + str(abs(exponent))


def json_double(x: float) -> str:
    """Json_wrapper::to_string of a J_DOUBLE."""
    if not math.isfinite(x):
        return "0.0"  # dtoa's DTOA_OVERFLOW answer "0", then ".0"
    text = my_gcvt(x, MY_GCVT_MAX_FIELD_WIDTH)
    return text if "." in text or "e" in text else text + ".0"


def json_text(value: Any) -> str:
    """A plain JSON document (dicts in storage order) as MySQL prints it: ", " and ": ", doubles as above."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {json_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(json_text(item) for item in value) + "]"
    if isinstance(value, float):
        return json_double(value)
    return json.dumps(value, ensure_ascii=False)


def double_from_bits(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]
