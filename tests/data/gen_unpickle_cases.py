#!/usr/bin/env python3
"""Generate the byte strings and expected values embedded in tests/test_unpickle.c.

Run:  python3 tests/data/gen_unpickle_cases.py > /tmp/cases.inc
and paste the output between the GENERATED markers of tests/test_unpickle.c.

Valid cases are checked here against Python's own pickle.loads (they contain no
opcode that imports or calls anything, so loading them is harmless); the
expected text is the Python-like repr that pkl_repr() prints. Error cases are
checked to fail in Python too, except the refused ones (GLOBAL, REDUCE, ...),
which are never loaded here.
"""
import math
import pickle
import struct
import sys
import warnings

warnings.simplefilter('ignore', DeprecationWarning)  # STRING '\\q' below


def fl(x):
    if math.isnan(x):
        return 'nan'
    if math.isinf(x):
        return '-inf' if x < 0 else 'inf'
    for p in range(1, 18):
        s = '%.*g' % (p, x)
        if float(s) == x:
            break
    if all(c in '-0123456789' for c in s):
        s += '.0'
    return s


def txt(b, isbytes):
    res = b''
    for c in b:
        if c in (0x5c, 0x27):
            res += b'\\' + bytes([c])
        elif c == 10:
            res += b'\\n'
        elif c == 13:
            res += b'\\r'
        elif c == 9:
            res += b'\\t'
        elif c < 0x20 or c == 0x7f or (isbytes and c >= 0x80):
            res += b'\\x%02x' % c
        else:
            res += bytes([c])
    return (b"b'" if isbytes else b"'") + res + b"'"


def rep(v):
    """What pkl_repr prints for v (sets print as lists, in pickled order)."""
    if v is None:
        return b'None'
    if v is True:
        return b'True'
    if v is False:
        return b'False'
    if isinstance(v, int):
        return str(v).encode()
    if isinstance(v, float):
        return fl(v).encode()
    if isinstance(v, str):
        return txt(v.encode('utf-8', 'surrogatepass'), False)
    if isinstance(v, (bytes, bytearray)):
        return txt(bytes(v), True)
    if isinstance(v, (list, set, frozenset)):
        return b'[' + b', '.join(rep(x) for x in v) + b']'
    if isinstance(v, tuple):
        return b'(' + b', '.join(rep(x) for x in v) + (b',' if len(v) == 1 else b'') + b')'
    if isinstance(v, dict):
        return b'{' + b', '.join(rep(k) + b': ' + rep(x) for k, x in v.items()) + b'}'
    raise TypeError(type(v))


def u64(n):
    return struct.pack('<Q', n)


def u32(n):
    return struct.pack('<I', n)


COMPOSITE = {'a': [1, True, False, None, 1.5, -0.25, 'é\n\\\'', 2**70, -5, 65535, -2**31,
                   2**31, (1, 2), (), (1,), (1, 2, 3), (1, 2, 3, 4), {'x': {'y': []}}],
             'big': -2**80, 'f': 1e300, 'e': '', 'nul': 'a\x00b', 'uni': '\u20ac\U0001f600'}
SNAPLIKE = {'segments': [{'device': 0, 'address': 139777059848192, 'total_size': 20971520,
                          'segment_pool_id': (0, 0), 'is_expandable': False,
                          'blocks': [{'address': 139777059848192, 'size': 512,
                                      'requested_size': 4, 'state': 'active_allocated',
                                      'frames': []}]}],
            'device_traces': [[{'action': 'alloc', 'addr': 139777059848192, 'size': 4,
                                'stream': 0, 'time_us': 1772688692031317, 'frames': []}]],
            'allocator_settings': {'garbage_collection_threshold': 0.0,
                                   'roundup_power2_divisions': {'1': 0}}}
shared = [1, 2]
WITH_BYTES = {'b': b'\x00\xff', 'ba': bytearray(b'xyz'), 's': {3, 1, 2}, 'fs': frozenset([7]),
              'shared': [shared, shared], 'long': list(range(1001))}

valid = []   # (name, bytes, expected repr)
for proto in range(6):
    valid.append(('composite_p%d' % proto, pickle.dumps(COMPOSITE, protocol=proto), COMPOSITE))
    valid.append(('snaplike_p%d' % proto, pickle.dumps(SNAPLIKE, protocol=proto), SNAPLIKE))
WITH_BYTES_P4 = {k: v for k, v in WITH_BYTES.items() if k != 'ba'}  # bytearray: REDUCE in p4
valid.append(('bytes_sets_p4', pickle.dumps(WITH_BYTES_P4, protocol=4), WITH_BYTES_P4))
valid.append(('bytes_sets_p5', pickle.dumps(WITH_BYTES, protocol=5), WITH_BYTES))
valid.append(('bigdict_p4', pickle.dumps({'k%d' % i: i for i in range(100)}, protocol=4), None))

hand = [
    ('long4', b'\x80\x02\x8b' + u32(10) + (2**75 + 3).to_bytes(10, 'little') + b'.'),
    ('long1_redundant', b'\x80\x02\x8a\x09' + (5).to_bytes(9, 'little') + b'.'),
    ('long1_neg_redundant', b'\x80\x02\x8a\x09' + (-5).to_bytes(9, 'little', signed=True) + b'.'),
    ('long1_2p63', b'\x80\x02\x8a\x09' + (2**63).to_bytes(9, 'little') + b'.'),
    ('long1_min64', b'\x80\x02\x8a\x08' + (-2**63).to_bytes(8, 'little', signed=True) + b'.'),
    ('long1_empty', b'\x80\x02\x8a\x00.'),
    ('binunicode8', b'\x80\x04\x8d' + u64(3) + b'abc.'),
    ('binbytes8', b'\x80\x04\x8e' + u64(2) + b'\x01\x02.'),
    ('binbytes', b'\x80\x03B' + u32(3) + b'a\x00b.'),
    ('short_binbytes', b'\x80\x03C\x01z.'),
    ('bytearray8', b'\x80\x05\x96' + u64(2) + b'hi.'),
    ('binstring', b'T' + u32(2) + b'ok.'),
    ('short_binstring', b'U\x03abc.'),
    ('string_escapes', b"S'a\\nb\\x41\\101\\\\\\'\\q\"'\n."),
    ('string_dquote', b'S"it\'s"\n.'),
    ('unicode_escapes', b'V\\u20ac\\U0001f600x\xe9\\\\u0041\n.'),
    ('int_text', b'(I01\nI00\nI-5\nI123\nI99999999999999999999\nI-99999999999999999999\nl.'),
    ('long_text', b'(L123L\nL-123456789012345678901234567890L\nL7\nl.'),
    ('float_text', b'(F1.5\nF-0.0\nF1e-300\nFinf\nF-inf\nl.'),
    ('binfloat', b'(G' + struct.pack('>d', -0.0) + b'G' + struct.pack('>d', 1e-300) +
     b'G' + struct.pack('>d', float('nan')) + b'l.'),
    ('binint', b'(J\xfb\xff\xff\xffJ\xff\xff\xff\x7fK\xffM\xff\xffl.'),
    ('pop_popmark', b'(K\x01K\x021K\x030K\x04.'),
    ('pop_pops_mark', b'K\x09(0.'),
    ('dup', b'K\x012\x86.'),
    ('put_get_text', b'I7\np0\n0g0\ng0\n\x86.'),
    ('memo_long', b'K\x07r\x05\x00\x00\x00(j\x05\x00\x00\x00j\x05\x00\x00\x00l.'),
    ('mark_collections', b'((K\x01K\x02t(K\x03l(Va\nK\x04dl.'),
    ('tuples', b'\x80\x02)K\x01\x85K\x01K\x02\x86K\x01K\x02K\x03\x87\x87.'),
    ('sets', b'\x80\x04\x8f(K\x01K\x02\x90(K\x03\x91\x86.'),
    ('dict_dup', b'}(K\x01K\x02K\x01K\x03u.'),
    ('dict_setitem', b'}K\x01K\x02sK\x01K\x05s.'),
    ('dict_mixed_keys', b'\x80\x04}(NK\x01\x88K\x02K\x01K\x03G?\xf0\x00\x00\x00\x00\x00\x00K\x04'
     b'C\x01kK\x05\x8c\x01kK\x06G\x00\x00\x00\x00\x00\x00\x00\x00K\x07G\x80\x00\x00\x00\x00\x00'
     b'\x00\x00K\x08\x89K\x09G@\x04\x00\x00\x00\x00\x00\x00K\x0aG@\x04\x00\x00\x00\x00\x00\x00K\x0b'
     b'\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00K\x0cu.'),
    ('frame', b'\x80\x04\x95\x03\x00\x00\x00\x00\x00\x00\x00K\x05..'),
    ('trailing_garbage', b'K\x01.\xff\xff junk'),
    ('surrogate', b'\x80\x04\x8c\x03\xed\xa0\x80.'),
    ('empty_containers', b'(]})\x8f(\x91t.'),
]
big_dup = b'\x80\x04}(' + b''.join(b'\x8c\x02k' + bytes([48 + i % 10]) + b'K' + bytes([i])
                                   for i in range(20)) + b'\x8c\x02k3K\xffu.'
hand.append(('bigdict_dup', big_dup))
for name, b in hand:
    valid.append((name, b, pickle.loads(b)))

errors = [  # (name, bytes, message fragment)
    ('empty', b'', 'ends without a STOP'),
    ('no_stop', b'K\x01', 'ends without a STOP'),
    ('trunc_binint', b'J\x01\x02', 'opcode BININT needs 4 more bytes, only 2 left'),
    ('trunc_unicode', b'X\x10\x00\x00\x00abc', 'opcode BINUNICODE needs 16 more bytes'),
    ('trunc_unicode8', b'\x8d' + u64(2**63) + b'ab', 'opcode BINUNICODE8 needs'),
    ('trunc_line', b'I12', 'has no end of line'),
    ('proto6', b'\x80\x06K\x01.', 'unsupported pickle protocol 6'),
    ('unknown_op', b'\xffK\x01.', 'unknown opcode 0xff'),
    ('underflow', b'a.', 'opcode APPEND needs a value but the stack is empty'),
    ('underflow_mark', b'K\x01(a.', 'since the last MARK'),
    ('stop_empty', b'.', 'opcode STOP needs a value'),
    ('no_mark', b']K\x01e.', 'needs an earlier MARK'),
    ('odd_setitems', b'}(K\x01u.', 'odd number (1)'),
    ('memo_missing', b'h\x05.', 'memo entry 5, which was never stored'),
    ('memo_huge', b'K\x01r\xff\xff\xff\xff.', 'memo index 4294967295'),
    ('bad_utf8', b'\x8c\x01\xff.', 'invalid UTF-8 at byte 0'),
    ('overlong_utf8', b'\x8c\x02\xc0\x80.', 'invalid UTF-8'),
    ('non_ascii_binstring', b'U\x01\xff.', 'non-ASCII byte (0xff)'),
    ('unquoted_string', b'Sabc\n.', 'must be quoted'),
    ('list_key', b'}(]K\x01u.', 'uses a list as a dict key'),
    ('append_to_dict', b'}K\x01a.', 'opcode APPEND needs a list below it on the stack, found a dict'),
    ('append_to_set', b'\x80\x04\x8fK\x01a.', 'found a set'),
    ('additems_frozenset', b'\x80\x04(\x91(K\x01\x90.', 'found a frozenset'),
    ('frame_too_long', b'\x95' + u64(1000) + b'K\x01.', 'FRAME of 1000 bytes'),
    ('long4_negative', b'\x8b\xff\xff\xff\xff.', 'negative byte count'),
    ('binstring_negative', b'T\xff\xff\xff\xff.', 'negative length'),
    ('int_text_bad', b'Ixyz\n.', 'not a decimal integer'),
    ('int_too_long', b'I' + b'9' * 4301 + b'\n.', 'integer of 4301 digits'),
    ('float_text_bad', b'F1.5x\n.', 'not a number'),
    ('bad_x_escape', b"S'\\xZZ'\n.", 'invalid \\x escape'),
    ('bad_u_escape', b'V\\u12\n.', 'truncated \\u escape'),
]
a = []
a.append(a)
errors.append(('recursive_list', pickle.dumps(a, protocol=4), 'inside itself'))
x = []
y = [x]
x.append(y)
errors.append(('mutual_recursion', pickle.dumps(x, protocol=4), 'already inside another container'))
d = {}
d['self'] = d
errors.append(('recursive_dict', pickle.dumps(d, protocol=2), 'inside itself'))
errors.append(('too_deep', b']' * 300 + b'a' * 299 + b'.', 'nest deeper than 256 levels'))
for name, b, frag in errors:
    try:
        pickle.loads(b)
        ok_in_python = True
    except Exception:
        ok_in_python = False
    # Python accepts recursion, deep nesting and a few refused encodings; note them.
    if ok_in_python and name not in ('recursive_list', 'mutual_recursion', 'recursive_dict',
                                     'too_deep', 'memo_huge', 'list_key', 'long4_negative'):
        sys.exit('error case %s loads in Python' % name)

refused = [  # never loaded here: these would import or call Python code
    ('global', b"cos\nsystem\n(S'echo hi'\ntR.", 'opcode GLOBAL (0x63) would import the Python '
     'object os.system'),
    ('stack_global', b'\x80\x04\x8c\x02os\x8c\x06system\x93\x8c\x02id\x85R.',
     'opcode STACK_GLOBAL (0x93) would import the Python object os.system'),
    ('reduce', b'N)R.', 'opcode REDUCE (0x52) would call a Python function'),
    ('build', b'}}b.', 'opcode BUILD (0x62) would set'),
    ('inst', b'(ios\nsystem\n.', 'opcode INST (0x69) would create an instance of the Python '
     'class os.system'),
    ('obj', b'(No.', 'opcode OBJ (0x6f) would construct'),
    ('newobj', b'\x80\x02N)\x81.', 'opcode NEWOBJ (0x81) would construct'),
    ('newobj_ex', b'\x80\x04N)}\x92.', 'opcode NEWOBJ_EX (0x92) would construct'),
    ('ext1', b'\x80\x02\x82\x01.', 'opcode EXT1 (0x82)'),
    ('ext2', b'\x80\x02\x83\x01\x00.', 'opcode EXT2 (0x83)'),
    ('ext4', b'\x80\x02\x84\x01\x00\x00\x00.', 'opcode EXT4 (0x84)'),
    ('persid', b'Pfoo\n.', 'opcode PERSID (0x50) would load'),
    ('binpersid', b'NQ.', 'opcode BINPERSID (0x51) would load'),
    ('next_buffer', b'\x80\x05\x97.', 'opcode NEXT_BUFFER (0x97)'),
    ('readonly_buffer', b'\x80\x05\x97\x98.', 'opcode NEXT_BUFFER (0x97)'),
    ('global_truncated', b'cos', 'opcode GLOBAL (0x63) would import a Python object'),
]


class Point:  # a real pickled object: pickle.dumps only writes it, nothing runs
    def __init__(self):
        self.x = 1


import collections  # noqa: E402
refused.append(('ordered_dict_p2', pickle.dumps(collections.OrderedDict(a=1), protocol=2),
                'opcode GLOBAL (0x63) would import the Python object collections.OrderedDict'))
refused.append(('object_p4', pickle.dumps(Point(), protocol=4),
                'opcode STACK_GLOBAL (0x93) would import the Python object __main__.Point'))
refused.append(('bytes_p2', pickle.dumps(b'ab', protocol=2),
                'opcode GLOBAL (0x63) would import the Python object _codecs.encode'))


def carr(b):
    return '"' + ''.join('\\x%02x' % c for c in b) + '"'


def cstr(b):
    out = ''
    for c in b:
        if c in (0x22, 0x5c):
            out += '\\' + chr(c)
        elif 0x20 <= c < 0x7f and c != 0x3f:  # no '?': avoids trigraph warnings
            out += chr(c)
        else:
            out += '\\%03o' % c
    return '"' + out + '"'


def emit(rows, fmt):
    for r in rows:
        print(fmt(r))


print('/* Generated by tests/data/gen_unpickle_cases.py; do not edit by hand. */')
print('static const struct valid_case valid_cases[] = {')
for name, b, obj in valid:
    if obj is None:
        obj = pickle.loads(b)
    r = rep(obj)  # for sets: the original object, whose order the pickle kept
    print('    {"%s", %s, %d, %s},' % (name, carr(b), len(b), cstr(r)))
print('};')
print('static const struct error_case error_cases[] = {')
for name, b, frag in errors:
    print('    {"%s", %s, %d, %s},' % (name, carr(b), len(b), cstr(frag.encode())))
print('};')
print('static const struct error_case refused_cases[] = {')
for name, b, frag in refused:
    print('    {"%s", %s, %d, %s},' % (name, carr(b), len(b), cstr(frag.encode())))
print('};')

# Expectations for the real snapshots copied into tests/data (see SOURCES.md).
SNAPSHOTS = ['tiny-segments-only', 'small-with-segments', 'oom-state-torch20',
             'forward-bf16-ctx128', 'gpt-medium-ctx512-infer', 'gpt-medium-ctx128-train',
             'finetune-no-timestamps']
ACTIONS = ['alloc', 'free_requested', 'free_completed', 'segment_alloc', 'segment_free',
           'segment_map', 'segment_unmap', 'snapshot', 'oom']


def fnv1a(b):
    h = 0xcbf29ce484222325
    for c in b:
        h = ((h ^ c) * 0x100000001b3) & 0xffffffffffffffff
    return h


import os  # noqa: E402
here = os.path.dirname(os.path.abspath(__file__))
print('static const struct snapshot_case snapshot_cases[] = {')
for name in SNAPSHOTS:
    with open(os.path.join(here, name + '.pickle'), 'rb') as f:
        snap = pickle.load(f)
    r = rep(snap)
    counts = [sum(1 for t in snap['device_traces'] for e in t if e['action'] == a)
              for a in ACTIONS]
    assert sum(counts) == sum(len(t) for t in snap['device_traces'])
    # the full repr is checked where it is small enough to build quickly
    h, n = (fnv1a(r), len(r)) if len(r) < 40_000_000 else (0, 0)
    print('    {"%s.pickle", %d, %d, {%s}, %d, 0x%016xull, %d},' %
          (name, len(snap['segments']), len(snap['device_traces']),
           ', '.join(str(c) for c in counts), sum(len(t) for t in snap['device_traces']), h, n))
print('};')
