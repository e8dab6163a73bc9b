"""The text: the licences Debian's base-files package ships in
/usr/share/common-licenses (every Debian machine and image has them, about
260 KB of English), as a map-style Dataset of fixed-length windows for
next-character prediction. Nothing is downloaded.

The dataset's size is fixed by design, not by the text: `windows` windows
at positions spread over the text with a fixed stride (a prime, so they
cover it evenly), so a job's spec.data.trainSamples does not change when a
Debian release edits a licence. The training windows come from the first
90% of the text, the test windows from the rest."""

import os

import torch

LICENSES = "/usr/share/common-licenses"
FILES = ["GPL-3", "LGPL-3", "GPL-2", "LGPL-2.1", "Apache-2.0", "MPL-2.0", "Artistic", "BSD",
         "GFDL-1.3", "CC0-1.0"]
VOCABULARY = 128  # ASCII; anything else reads as 0
CONTEXT = 64      # characters in, each one's successor out
TRAIN_WINDOWS = 20000
TEST_WINDOWS = 1000
_STRIDE = 7919    # a prime


def read_text(directory=LICENSES):
    """The licences, concatenated, as a uint8 tensor of ASCII codes."""
    parts = []
    for name in FILES:
        with open(os.path.join(directory, name), "rb") as f:
            parts.append(f.read())
    data = bytearray(b"\n\n".join(parts))
    for i, b in enumerate(data):
        if b >= VOCABULARY:
            data[i] = 0
    return torch.tensor(data, dtype=torch.uint8)


class CharWindows(torch.utils.data.Dataset):
    """Sample i: (CONTEXT characters, the CONTEXT characters one later), as
    int64 codes."""

    def __init__(self, train=True, directory=LICENSES):
        text = read_text(directory)
        cut = int(len(text) * 0.9)
        self.text = text[:cut] if train else text[cut:]
        self.windows = TRAIN_WINDOWS if train else TEST_WINDOWS
        self.span = len(self.text) - CONTEXT - 1
        if self.span <= 0:
            raise ValueError("%s: too little text" % directory)

    def __len__(self):
        return self.windows

    def __getitem__(self, i):
        if not 0 <= i < self.windows:
            raise IndexError(i)
        start = (i * _STRIDE) % self.span
        chunk = self.text[start:start + CONTEXT + 1].long()
        return chunk[:-1], chunk[1:]
