"""A Chrome trace's bytes scanned into columns: the trace reader's fast path.

``scan_trace`` walks the JSON once and keeps, of each event of the three categories the reader
uses, the fields it reads: a name as a byte range of the buffer, ``ts`` and ``dur`` as floats,
``tid`` as an integer. It validates the whole text as JSON as it goes. Anything it does not
expect (not the Chrome trace's shape, a field of another type, an escape in a key, a number it
cannot take exactly, invalid JSON) makes it answer "not mine", and ``fastpp.measured.read``
reads the file the general way, which also words the error.

Its numbers are exact: a decimal ``m * 10**e`` with ``m <= 2**53`` and ``|e| <= 22`` is one
correctly rounded product or quotient of two exact floats (Clinger's fast path), so the value
is the one Python's ``float`` gives; other numbers of the fields kept are flagged ``slow`` and
their text is converted by the caller.
"""

import numpy as np

from .._jit import jit

# event codes of the columns: an operator (the op's compute), a send it posts, a CPU and a GPU
# annotation range
CHILD, POST, USER, GPU = 0, 1, 2, 3
SLOW_TS, SLOW_DUR = 1, 2  # flags: the field's text is converted by the caller

_KEYS = (b"traceEvents", b"distributedInfo", b"baseTimeNanoseconds", b"host_name",  # header
         b"cat", b"name", b"ph", b"ts", b"dur", b"tid",  # an event's fields
         b"cpu_op", b"user_annotation", b"gpu_user_annotation")  # categories
_WORDS = np.zeros((len(_KEYS), max(map(len, _KEYS))), np.uint8)
_LENGTHS = np.array([len(w) for w in _KEYS], np.int64)
for _row, _word in enumerate(_KEYS):
    _WORDS[_row, :len(_word)] = np.frombuffer(_word, np.uint8)
_EVENTS, _HEADER, _FIELDS, _CATEGORIES, _END = 0, 1, 4, 10, len(_KEYS)
_CAT, _NAME, _PH, _TS, _DUR, _TID = range(4, 10)
_C10D_SEND = np.frombuffer(b"c10d::send", np.uint8)  # what a send posted is named
_POW10 = np.array([float(10 ** k) for k in range(23)])  # each exact
_EXACT = 2 ** 53
# the shortest event kept (the columns' rows are allocated for as many as the file can hold)
_SMALLEST = len(b'{"cat":"cpu_op","name":"","ts":0,"tid":0}')
_DEEPEST = 500  # nesting beyond what the JSON parsers accept (orjson: 1024) is not ours

# parser states: a value due, a key due, after a value (',' or a closer due); just opened
_VALUE, _KEY, _AFTER, _FIRST_VALUE, _FIRST_KEY = range(5)


@jit
def scan_trace(buf):
    """Scan a Chrome trace's bytes (``uint8``).

    Returns ``ok, count, header, code, name, escaped, ts, dur, tid, slow, text``: whether the
    trace is one this scan reads, the events kept (the columns' first ``count`` rows), the
    byte ranges of the header's ``distributedInfo``, ``baseTimeNanoseconds`` and
    ``host_name`` values (``-1`` when absent), and per event its code (``CHILD``...), its
    name's byte range (without quotes) and whether it holds escapes, ``ts``, ``dur`` (0 for a
    ``POST``), ``tid``, the ``SLOW_*`` flags and the byte ranges of ``ts`` and ``dur``.
    """
    n = buf.size
    cap = n // _SMALLEST + 1
    code = np.empty(cap, np.int8)
    name = np.empty((cap, 2), np.int64)
    escaped = np.empty(cap, np.bool_)
    ts = np.empty(cap, np.float64)
    dur = np.empty(cap, np.float64)
    tid = np.empty(cap, np.int64)
    slow = np.empty(cap, np.int8)
    text = np.empty((cap, 4), np.int64)
    header = np.empty(6, np.int64)
    header.fill(-1)
    stack = np.empty(_DEEPEST + 2, np.bool_)  # True: an object
    count = 0
    depth = 0
    state = _VALUE
    bad = False
    in_events = False  # the array open at depth 2 is traceEvents
    got_events = False
    top_key = -1  # the key at depth 1 whose value is due or open
    top_seen = 0
    ev_key = -1
    ev_seen = 0
    # the event's fields, by key - _CAT: 0 absent (or null), 1 kept, 2 of another type (cat:
    # its category, 1 to 3, or 0; ph: 1 "X", 3 another string)
    field = np.zeros(6, np.int64)
    e_a = e_b = e_ts_a = e_ts_b = e_dur_a = e_dur_b = 0
    e_esc = False
    e_slow = 0
    e_tsv = e_durv = 0.0
    e_tidv = 0
    i = 0
    while True:
        while i < n and (buf[i] == 32 or buf[i] == 10 or buf[i] == 13 or buf[i] == 9):
            i += 1
        if i >= n:
            bad = not (depth == 0 and state == _AFTER)
            break
        c = buf[i]
        closing = False
        if state == _AFTER:
            if depth == 0:
                bad = True
                break
            if c == 44:  # ,
                state = _KEY if stack[depth] else _VALUE
                i += 1
                continue
            closing = (c == 125) if stack[depth] else (c == 93)
            if not closing:
                bad = True
                break
        elif state == _FIRST_KEY and c == 125 or state == _FIRST_VALUE and c == 93:
            closing = True
        if closing:
            if depth == 3 and in_events:  # an event ends: keep what the reader uses
                kind = -1
                if field[0] == 1:  # a profiled operator: its name says its role
                    if field[1] != 1:
                        bad = True
                        break
                    lit = e_b - e_a  # its bytes before the first escape
                    if e_esc:
                        lit = 0
                        while buf[e_a + lit] != 92:
                            lit += 1
                    same = 0  # how many of "c10d::send" it starts with
                    while same < 10 and same < lit and buf[e_a + same] == _C10D_SEND[same]:
                        same += 1
                    if same < 10 and same == lit and e_esc:  # an escape decides
                        bad = True
                        break
                    kind = CHILD if same < 6 else -1  # c10d::, not a send: not kept
                    if same == 10:  # a send posted, if no word character follows
                        if lit == 10 and e_esc:
                            bad = True
                            break
                        after = buf[e_a + 10] if lit > 10 else 32
                        if after >= 128:  # a non-ASCII character: word or not?
                            bad = True
                            break
                        word = (48 <= after <= 57 or 65 <= after <= 90 or
                                97 <= after <= 122 or after == 95)
                        kind = -1 if word else POST
                    if kind != -1 and (field[3] != 1 or field[5] != 1 or
                                       kind == CHILD and field[4] == 2):
                        bad = True
                        break
                elif field[0] == 2 or field[0] == 3:  # an annotation: its complete ranges
                    if field[2] == 2:
                        bad = True
                        break
                    if field[2] == 1:
                        if field[1] != 1 or field[3] != 1 or field[4] != 1 or field[5] != 1:
                            bad = True
                            break
                        kind = USER if field[0] == 2 else GPU
                if kind != -1:
                    code[count] = kind
                    name[count, 0] = e_a
                    name[count, 1] = e_b
                    escaped[count] = e_esc
                    ts[count] = e_tsv
                    dur[count] = e_durv if kind != POST and field[4] == 1 else 0.0
                    tid[count] = e_tidv
                    slow[count] = e_slow if kind != POST else e_slow & SLOW_TS
                    text[count, 0] = e_ts_a
                    text[count, 1] = e_ts_b
                    text[count, 2] = e_dur_a
                    text[count, 3] = e_dur_b
                    count += 1
            elif depth == 2 and in_events:
                in_events = False
                got_events = True
            elif depth == 2 and _HEADER <= top_key < _FIELDS:
                header[2 * (top_key - _HEADER) + 1] = i + 1
            depth -= 1
            state = _AFTER
            i += 1
            continue
        # a key or a value starts at i
        if state == _KEY or state == _FIRST_KEY:
            if c != 34:
                bad = True
                break
        if c == 34:  # a string
            j = i + 1
            esc = False
            while True:
                if j >= n:
                    bad = True
                    break
                b = buf[j]
                if b == 34:
                    break
                if b < 32:
                    bad = True
                    break
                if b == 92:
                    esc = True
                    j += 1
                    if j >= n:
                        bad = True
                        break
                    b = buf[j]
                    if b == 117:  # \uXXXX
                        if j + 4 >= n:
                            bad = True
                            break
                        v = 0
                        for q in range(j + 1, j + 5):
                            h = int(buf[q])  # (an int, also when run as Python)
                            if 48 <= h <= 57:
                                v = v * 16 + h - 48
                            elif 97 <= h <= 102:
                                v = v * 16 + h - 87
                            elif 65 <= h <= 70:
                                v = v * 16 + h - 55
                            else:
                                v = -1
                                break
                        if v < 0 or 0xD800 <= v <= 0xDFFF:  # surrogates: the parsers differ
                            bad = True
                            break
                        j += 4
                    elif not (b == 34 or b == 92 or b == 47 or b == 98 or b == 102 or
                              b == 110 or b == 114 or b == 116):
                        bad = True
                        break
                j += 1
            if bad:
                break
            # which of the words it is, where one matters
            lo = hi = 0
            if state == _KEY or state == _FIRST_KEY:
                if depth == 1:
                    lo, hi = _EVENTS, _FIELDS
                elif depth == 3 and in_events:
                    lo, hi = _FIELDS, _CATEGORIES
            elif depth == 3 and in_events and ev_key == _CAT:
                lo, hi = _CATEGORIES, _END
            found = -1
            if hi > lo:
                if esc:  # an escaped key or category might spell one: not ours
                    bad = True
                    break
                for w in range(lo, hi):
                    if _LENGTHS[w] == j - i - 1:
                        same = True
                        for q in range(_LENGTHS[w]):
                            if buf[i + 1 + q] != _WORDS[w, q]:
                                same = False
                                break
                        if same:
                            found = w
                            break
            if state == _KEY or state == _FIRST_KEY:
                if depth == 1:
                    top_key = found
                    if found >= 0:
                        if top_seen & (1 << found):  # a repeated key: not ours
                            bad = True
                            break
                        top_seen |= 1 << found
                elif depth == 3 and in_events:
                    ev_key = found
                    if found >= 0:
                        if ev_seen & (1 << found):
                            bad = True
                            break
                        ev_seen |= 1 << found
                i = j + 1
                while i < n and (buf[i] == 32 or buf[i] == 10 or buf[i] == 13 or buf[i] == 9):
                    i += 1
                if i >= n or buf[i] != 58:  # :
                    bad = True
                    break
                i += 1
                state = _VALUE
                continue
            if depth == 3 and in_events:
                if ev_key == _CAT:
                    field[0] = 0 if found < 0 else found - _CATEGORIES + 1
                elif ev_key == _NAME:
                    field[1] = 1
                    e_a = i + 1
                    e_b = j
                    e_esc = esc
                elif ev_key == _PH:
                    field[2] = 2 if esc else (1 if j == i + 2 and buf[i + 1] == 88 else 3)
                elif ev_key >= 0:
                    field[ev_key - _CAT] = 2
            elif depth == 2 and in_events:
                bad = True  # an event that is not an object
                break
            elif depth == 1 and _HEADER <= top_key < _FIELDS:
                header[2 * (top_key - _HEADER)] = i
                header[2 * (top_key - _HEADER) + 1] = j + 1
            i = j + 1
            state = _AFTER
            continue
        if c == 123 or c == 91:  # { or [
            if depth == 1 and top_key == _EVENTS:
                if c != 91 or got_events:
                    bad = True
                    break
                in_events = True
            elif depth == 2 and in_events:
                if c != 123:
                    bad = True
                    break
                ev_seen = 0
                ev_key = -1
                field[:] = 0
                e_esc = False
                e_slow = 0
            elif depth == 3 and in_events and ev_key >= 0:
                if ev_key == _CAT:  # unhashable: the general reader names it
                    bad = True
                    break
                field[ev_key - _CAT] = 2
            elif depth == 1 and _HEADER <= top_key < _FIELDS:
                header[2 * (top_key - _HEADER)] = i
            elif depth == 0 and c != 123:
                bad = True
                break
            if depth == _DEEPEST:
                bad = True
                break
            depth += 1
            stack[depth] = c == 123
            state = _FIRST_KEY if c == 123 else _FIRST_VALUE
            i += 1
            continue
        if depth == 0 or depth == 2 and in_events:  # a top or event that is not an object
            bad = True
            break
        j = i
        if c == 45 or 48 <= c <= 57:  # a number
            neg = c == 45
            if neg:
                j += 1
            m = 0
            digits = 0  # in the integer part
            kept = 0  # significant digits in m
            frac = 0
            fast = True
            is_int = True
            if j < n and buf[j] == 48:
                j += 1
                digits = 1
            elif j < n and 49 <= buf[j] <= 57:
                while j < n and 48 <= buf[j] <= 57:
                    if kept < 18:
                        m = m * 10 + (int(buf[j]) - 48)
                        kept += 1
                    else:
                        fast = False
                    digits += 1
                    j += 1
            else:
                bad = True
                break
            if j < n and buf[j] == 46:  # .
                is_int = False
                j += 1
                if not (j < n and 48 <= buf[j] <= 57):
                    bad = True
                    break
                while j < n and 48 <= buf[j] <= 57:
                    if kept < 18:
                        if m > 0 or buf[j] > 48:
                            kept += 1
                        m = m * 10 + (int(buf[j]) - 48)
                        frac += 1
                    else:
                        fast = False
                    j += 1
            e = 0
            if j < n and (buf[j] == 101 or buf[j] == 69):  # e E
                is_int = False
                j += 1
                sign = 1
                if j < n and (buf[j] == 43 or buf[j] == 45):
                    sign = -1 if buf[j] == 45 else 1
                    j += 1
                if not (j < n and 48 <= buf[j] <= 57):
                    bad = True
                    break
                while j < n and 48 <= buf[j] <= 57:
                    if e < 10000:
                        e = e * 10 + (int(buf[j]) - 48)
                    j += 1
                if e > 300:  # near the float's range: the parsers differ
                    bad = True
                    break
                e *= sign
            if is_int and (digits > 19 or digits == 19 and neg):  # beyond int64/uint64
                bad = True
                break
            e -= frac
            value = 0.0
            if fast and m <= _EXACT and -22 <= e <= 22:
                value = m * _POW10[e] if e >= 0 else m / _POW10[-e]
                if neg and not (is_int and m == 0):  # -0 is the integer 0
                    value = -value
            else:
                fast = False
            if depth == 3 and in_events:
                if ev_key == _CAT:
                    bad = True
                    break
                # ts and dur apart: held in arrays and set through one branch they compiled
                # 1.5-2.5 s slower (docs/performance.md)
                if ev_key == _TS:
                    field[3] = 1
                    e_tsv = value
                    e_ts_a = i
                    e_ts_b = j
                    e_slow = (e_slow & ~SLOW_TS) | (0 if fast else SLOW_TS)
                elif ev_key == _DUR:
                    field[4] = 1
                    e_durv = value
                    e_dur_a = i
                    e_dur_b = j
                    e_slow = (e_slow & ~SLOW_DUR) | (0 if fast else SLOW_DUR)
                elif ev_key == _TID:
                    field[5] = 1 if is_int and digits <= 18 else 2
                    e_tidv = -m if neg else m
                elif ev_key >= 0:  # a name or phase
                    field[ev_key - _CAT] = 2
        elif c == 116 or c == 102 or c == 110:  # true false null
            size = 5 if c == 102 else 4
            if j + size > n:
                bad = True
                break
            ok = (c == 116 and buf[j + 1] == 114 and buf[j + 2] == 117 and buf[j + 3] == 101) or \
                (c == 110 and buf[j + 1] == 117 and buf[j + 2] == 108 and buf[j + 3] == 108) or \
                (c == 102 and buf[j + 1] == 97 and buf[j + 2] == 108 and buf[j + 3] == 115 and
                 buf[j + 4] == 101)
            if not ok:
                bad = True
                break
            j += size
            if depth == 3 and in_events and ev_key >= 0:
                if c != 110 and ev_key == _CAT:  # true, false: not a category
                    bad = True
                    break
                # null: as if absent where that is allowed (the category, the phase)
                field[ev_key - _CAT] = 0 if c == 110 and (ev_key == _CAT or ev_key == _PH) else 2
        else:
            bad = True
            break
        if depth == 1 and _HEADER <= top_key < _FIELDS:
            header[2 * (top_key - _HEADER)] = i
            header[2 * (top_key - _HEADER) + 1] = j
        i = j
        state = _AFTER
    return (not bad and got_events, count, header, code, name, escaped, ts, dur, tid, slow,
            text)
