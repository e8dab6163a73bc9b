"""Epoch order: the permutation whose positions a DataTask names, identical
to services/learn/epoch_order.cc (xoshiro256** seeded through splitmix64,
Lemire's bounded integers, Fisher-Yates from the back)."""

_MASK = (1 << 64) - 1


def _splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & _MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return state, z ^ (z >> 31)


def _rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & _MASK


class Xoshiro256:
    """xoshiro256** 1.0, as services/base/xoshiro256.cc."""

    def __init__(self, seed, stream):
        _, mixed = _splitmix64(stream & _MASK)
        state = (seed ^ mixed) & _MASK
        self.s = []
        for _ in range(4):
            state, word = _splitmix64(state)
            self.s.append(word)

    def next(self):
        s = self.s
        result = (_rotl((s[1] * 5) & _MASK, 7) * 9) & _MASK
        t = (s[1] << 17) & _MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 45)
        return result

    def below(self, bound):
        """Uniform in [0, bound), 0 < bound < 2**32, without modulo bias."""
        m = (self.next() >> 32) * bound
        low = m & 0xFFFFFFFF
        if low < bound:
            threshold = ((1 << 32) - bound) % bound
            while low < threshold:
                m = (self.next() >> 32) * bound
                low = m & 0xFFFFFFFF
        return m >> 32


def epoch_permutation(seed, epoch, n):
    """Entry p is the sample read at position p of `epoch`."""
    order = list(range(n))
    # Xoshiro256.next() and below() inlined, the state in locals: a trainer
    # draws one order per epoch on its training thread (60,000 samples:
    # several times faster than through the methods).
    s0, s1, s2, s3 = Xoshiro256(seed, epoch).s
    mask = _MASK
    for i in range(n, 1, -1):
        while True:
            x = (s1 * 5) & mask
            result = ((((x << 7) | (x >> 57)) & mask) * 9) & mask
            t = (s1 << 17) & mask
            s2 ^= s0
            s3 ^= s1
            s1 ^= s2
            s0 ^= s3
            s2 ^= t
            s3 = ((s3 << 45) | (s3 >> 19)) & mask
            m = (result >> 32) * i
            # Lemire: m's low word below the threshold is rejected, and the
            # threshold is only computed when the low word is below i.
            if (m & 0xFFFFFFFF) >= i or (m & 0xFFFFFFFF) >= ((1 << 32) - i) % i:
                break
        j = m >> 32
        order[i - 1], order[j] = order[j], order[i - 1]
    return order
