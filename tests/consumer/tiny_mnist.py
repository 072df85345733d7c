# Writes a tiny learnable MNIST-shaped IDX set into DIR: 128 training and 32
# test images whose label's row is bright. usage: tiny_mnist.py DIR
import os, random, struct, sys

d = sys.argv[1]
os.makedirs(d, exist_ok=True)
random.seed(0)
for split, n in (("train", 128), ("t10k", 32)):
    images = bytearray()
    for i in range(n):
        pixels = [random.randrange(128) for _ in range(784)]
        row = 4 + 2 * (i % 10)
        pixels[row * 28 + 4:row * 28 + 24] = [255] * 20
        images += bytes(pixels)
    with open(f"{d}/{split}-images-idx3-ubyte", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + images)
    with open(f"{d}/{split}-labels-idx1-ubyte", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n)))
