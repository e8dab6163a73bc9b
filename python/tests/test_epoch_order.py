"""The epoch order against services/learn/epoch_order_test.cc's golden values."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gaptrain.epoch_order import Xoshiro256, epoch_permutation  # noqa: E402


class EpochOrderTest(unittest.TestCase):
    def test_golden_values(self):
        self.assertEqual(epoch_permutation(42, 0, 10), [5, 6, 9, 3, 0, 8, 7, 4, 2, 1])
        self.assertEqual(epoch_permutation(42, 1, 10), [9, 7, 6, 4, 2, 0, 8, 5, 1, 3])
        self.assertEqual(epoch_permutation(7, 0, 10), [7, 4, 0, 8, 5, 9, 6, 1, 3, 2])
        self.assertEqual(epoch_permutation(1, 3, 16),
                         [9, 14, 1, 0, 3, 2, 12, 7, 8, 15, 13, 10, 11, 4, 6, 5])
        big = epoch_permutation(2024, 5, 60000)
        self.assertEqual(big[:8], [4176, 34847, 47007, 30560, 25060, 2313, 46426, 13246])
        self.assertEqual(big[-3:], [42263, 4086, 33544])
        self.assertEqual(sorted(big), list(range(60000)))

    def test_xoshiro_golden_outputs(self):
        a = Xoshiro256(0, 0)
        self.assertEqual([a.next() for _ in range(3)],
                         [0xfb5405f7bd79c540, 0x780c98e26cea5883, 0x2a146e0980febc66])
        b = Xoshiro256(42, 7)
        self.assertEqual([b.next() for _ in range(2)], [0x24bfb39aeb008c15, 0xd858489e7fc02496])

    def test_small(self):
        self.assertEqual(epoch_permutation(1, 0, 0), [])
        self.assertEqual(epoch_permutation(1, 0, 1), [0])


if __name__ == "__main__":
    unittest.main()
