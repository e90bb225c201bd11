"""snapgen.py - what the shell tests that write PyTorch memory snapshots by
hand share (sites.sh, top_sites.sh, leak_sites.sh): the trace's events, 10 us
apart from t = 1 s, user frames under train.py's main, and the pickle as
torch.cuda.memory._snapshot() lays it out (device_traces, segments).

    import sys
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    sys.path.insert(0, SOURCE_DIR + '/tests/cli')
    from snapgen import MiB, S, fr, Trace
"""
import pickle

MiB = 1 << 20
S = 0x7F0000000000  # the first segment's address


def fr(f, l, n):
    """A user frame in /home/u/proj/F, called from train.py:5 (main)."""
    return [{'filename': '/home/u/proj/' + f, 'line': l, 'name': n},
            {'filename': '/home/u/proj/train.py', 'line': 5, 'name': 'main'}]


class Trace:
    def __init__(self):
        self.t, self.e = 1000000, []

    def add(self, action, addr, size, frames):
        self.e.append({'action': action, 'addr': addr, 'size': size, 'stream': 0,
                       'time_us': self.t, 'frames': frames})
        self.t += 10

    def free(self, addr, size):
        """The program's free, then the allocator's."""
        self.add('free_requested', addr, size, [])
        self.add('free_completed', addr, size, [])

    def dump(self, path, segments):
        with open(path, 'wb') as f:
            pickle.dump({'segments': segments, 'device_traces': [self.e]}, f, protocol=4)
