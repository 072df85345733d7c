# Writes a tiny MNIST-shaped IDX set into DIR for the tests: TRAIN and TEST
# images of 28x28 with labels i % 10, drawn from random.seed(SEED). Plain:
# uniform noise; --learnable: noise below 128 with a bright row picked by the
# label, so a net can learn it.
# usage: tiny_mnist.py DIR TRAIN TEST SEED [--learnable]
import os, random, struct, sys

d, counts, seed = sys.argv[1], (int(sys.argv[2]), int(sys.argv[3])), int(sys.argv[4])
learnable = "--learnable" in sys.argv[5:]
os.makedirs(d, exist_ok=True)
random.seed(seed)
for split, n in zip(("train", "t10k"), counts):
    if learnable:
        images = bytearray()
        for i in range(n):
            pixels = [random.randrange(128) for _ in range(784)]
            row = 4 + 2 * (i % 10)
            pixels[row * 28 + 4:row * 28 + 24] = [255] * 20
            images += bytes(pixels)
    else:
        images = bytes(random.randrange(256) for _ in range(n * 784))
    with open(f"{d}/{split}-images-idx3-ubyte", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + images)
    with open(f"{d}/{split}-labels-idx1-ubyte", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n)))
