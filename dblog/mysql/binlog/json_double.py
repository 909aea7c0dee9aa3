"""A double inside a MySQL JSON value, as MySQL prints it: the text a SELECT of the JSON column returns.

MySQL prints a JSON double (sql-common/json_dom.cc, `wrapper_to_string`, case `J_DOUBLE`; sql/json_dom.cc
before 8.0.27) with

    my_gcvt(d, MY_GCVT_ARG_DOUBLE, MY_GCVT_MAX_FIELD_WIDTH, ...)

and then appends ".0" when that text has neither a '.' nor an 'e' ("to preserve the information that this
is a floating-point number"). strings/dtoa.cc, `my_gcvt`:

* the digits are dtoa's mode 4 with `width` significant digits: with a width above 17 they are the
  shortest digits that read back as the same double, the digits Python's `repr` prints (both are
  David Gay's dtoa);
* `width` is MY_GCVT_MAX_FIELD_WIDTH = DBL_DIG + 4 + max(5, MAX_DECPT_FOR_F_FORMAT) = 34 characters, one
  fewer for a negative number;
* with d = 0.D1D2...Dn x 10^decpt, the fixed format is used when it fits the width and MAX_DECPT_FOR_F_FORMAT
  (DBL_DIG = 15) allows it: decpt >= -14, and decpt <= 15 or the digits go past the point (n > decpt).
  With at most 17 digits and a width of 33 or 34 every such number fits, so that is the whole rule;
* otherwise the exponent format: "D1.D2...Dne<exp>" with no '+' and no leading zeros in the exponent.

So 1e16 prints as 1e16 (Python: 1e+16), 0.00001 as 0.00001 (1e-05), 2^53 as 9.007199254740992e15
(9007199254740992.0), 1e15 as 1e15, 1e14 as 100000000000000.0, 1e-15 as 0.000000000000001 and 1e-16 as
1e-16. NaN and the infinities cannot be stored in a JSON value; dtoa answers them with "0" (DTOA_OVERFLOW),
so MySQL would print 0.0, and so does this.

Pure. `tests/mysql/test_mysql_json_doubles.py` checks it against a separate transliteration of `my_gcvt`
over the whole double range and against MySQL's own test results.
"""

from __future__ import annotations

import math

__all__ = ["json_double_text"]

_MAX_DECPT_FOR_F_FORMAT = 15  # DBL_DIG


def json_double_text(value: float) -> str:
    """MySQL's text of a JSON double."""
    if not math.isfinite(value):
        return "0.0"
    digits, decpt = _shortest_digits(abs(value))
    sign = "-" if math.copysign(1.0, value) < 0 else ""  # dtoa signs -0.0 too
    count = len(digits)
    if -_MAX_DECPT_FOR_F_FORMAT + 1 <= decpt and (decpt <= _MAX_DECPT_FOR_F_FORMAT or count > decpt):
        if decpt <= 0:
            return f"{sign}0.{'0' * -decpt}{digits}"
        if decpt < count:
            return f"{sign}{digits[:decpt]}.{digits[decpt:]}"
        return f"{sign}{digits}{'0' * (decpt - count)}.0"  # no point, no exponent: ".0" appended
    mantissa = digits[0] + (f".{digits[1:]}" if count > 1 else "")
    return f"{sign}{mantissa}e{decpt - 1}"


def _shortest_digits(magnitude: float) -> tuple[str, int]:
    """(digits without leading or trailing zeros, decpt) with magnitude = 0.digits x 10^decpt, from
    repr's shortest round-trip text ('123.45', '1e-05', '1.5e+16'); zero is ("0", 1), as dtoa gives it."""
    mantissa, _, exponent = repr(magnitude).partition("e")
    whole, _, fraction = mantissa.partition(".")
    all_digits = whole + fraction
    digits = all_digits.lstrip("0")
    if not digits.strip("0"):
        return "0", 1
    decpt = len(whole) + int(exponent or 0) - (len(all_digits) - len(digits))
    return digits.rstrip("0"), decpt
