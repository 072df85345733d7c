#!/usr/bin/python3
"""Reference cases for issue 22's shape and indexing ops (tests/framework/test_torch_shape.cpp)."""
import torch
import torch.nn.functional as F

from torch_cases import Cases, NoGrad

c = Cases("shape")
r = torch.randn
c.add("permute_4d", "permute", lambda x: x.permute(2, 0, 3, 1), [r(2, 3, 4, 5)], {"dims": [2, 0, 3, 1]})
c.add("permute_negative", "permute", lambda x: x.permute(-1, 0, 1), [r(3, 2, 4)], {"dims": [-1, 0, 1]})
c.add("transpose_0_2", "transpose", lambda x: x.transpose(0, 2), [r(2, 3, 4, 2)], {"d0": 0, "d1": 2})
c.add("narrow_inner", "narrow", lambda x: x.narrow(2, 1, 2), [r(2, 3, 4)], {"dim": 2, "start": 1, "length": 2})
c.add("narrow_dim0", "narrow", lambda x: x.narrow(0, 1, 2), [r(4, 3)], {"dim": 0, "start": 1, "length": 2})
c.add("narrow_negative_start", "narrow", lambda x: x.narrow(1, -2, 2), [r(3, 5)],
      {"dim": 1, "start": -2, "length": 2})
c.add("slice_clamped", "slice", lambda x: x[:, -3:100], [r(3, 5)], {"dim": 1, "start": -3, "end": 100})
c.add("split", "split", lambda x: x.split(2, dim=1), [r(3, 5, 2)], {"size": 2, "dim": 1})
c.add("split_with_sizes", "split_with_sizes", lambda x: x.split([1, 3, 1], dim=-1), [r(2, 5)],
      {"sizes": [1, 3, 1], "dim": -1})
c.add("chunk", "chunk", lambda x: x.chunk(3, dim=0), [r(7, 2)], {"chunks": 3, "dim": 0})
c.add("cat_dim1", "cat", lambda a, b, d: torch.cat([a, b, d], 1), [r(2, 3, 4), r(2, 1, 4), r(2, 2, 4)], {"dim": 1})
c.add("cat_last", "cat", lambda a, b: torch.cat([a, b], -1), [r(3, 2), r(3, 4)], {"dim": -1})
c.add("stack_dim1", "stack", lambda a, b: torch.stack([a, b], 1), [r(3, 4), r(3, 4)], {"dim": 1})
c.add("unsqueeze", "unsqueeze", lambda x: x.unsqueeze(-2), [r(3, 4)], {"dim": -2})
c.add("squeeze_all", "squeeze", lambda x: x.squeeze(), [r(1, 3, 1, 4)], {})
c.add("squeeze_dim", "squeeze", lambda x: x.squeeze(2), [r(1, 3, 1, 4)], {"dim": 2})
c.add("unflatten", "unflatten", lambda x: x.unflatten(1, (2, -1)), [r(3, 8)], {"dim": 1, "sizes": [2, -1]})
c.add("flatten_middle", "flatten", lambda x: x.flatten(1, 2), [r(2, 3, 4, 5)], {"start": 1, "end": 2})
c.add("expand", "expand", lambda x: x.expand(2, 3, -1, 4), [r(3, 1, 1)], {"shape": [2, 3, -1, 4]})
c.add("index_select_dim1", "index_select", lambda x, i: x.index_select(1, i),
      [r(2, 5, 3), NoGrad(torch.tensor([4, 0, 4, 2]))], {"dim": 1})
c.add("index_select_int32", "index_select", lambda x, i: x.index_select(0, i),
      [r(4, 3), NoGrad(torch.tensor([3, 3, 0], dtype=torch.int32))], {"dim": 0})
c.add("where_broadcast", "where", lambda cnd, a, b: torch.where(cnd != 0, a, b),
      [NoGrad(torch.randint(0, 2, (4, 1))), r(4, 3), r(3)], {})
c.add("masked_fill", "masked_fill", lambda x, m: x.masked_fill(m != 0, -2.5),
      [r(2, 4, 3), NoGrad(torch.randint(0, 2, (4, 1)))], {"value": -2.5})
# torch.matmul: broadcast batch dims and 1-D operands
c.add("matmul_broadcast_4d_3d", "matmul", torch.matmul, [r(2, 1, 3, 4), r(5, 4, 2)])
c.add("matmul_2d_3d", "matmul", torch.matmul, [r(3, 4), r(2, 4, 5)])
c.add("matmul_1d_1d", "matmul", torch.matmul, [r(4), r(4)])
c.add("matmul_1d_2d", "matmul", torch.matmul, [r(4), r(4, 3)])
c.add("matmul_2d_1d", "matmul", torch.matmul, [r(3, 4), r(4)])
c.add("matmul_1d_4d", "matmul", torch.matmul, [r(4), r(2, 3, 4, 2)])
c.add("matmul_4d_1d", "matmul", torch.matmul, [r(2, 3, 2, 4), r(4)])
c.add("matmul_trans_broadcast", "matmul_tt", lambda a, b: torch.matmul(a.transpose(-1, -2), b.transpose(-1, -2)),
      [r(2, 1, 4, 3), r(3, 2, 4)])
# stage 2: gather/scatter_add along a dim, pad, tril/triu, one_hot
c.add("gather_dim1", "gather", lambda x, i: torch.gather(x, 1, i),
      [r(3, 4, 2), NoGrad(torch.randint(0, 4, (3, 5, 2)))], {"dim": 1})
c.add("gather_smaller_index", "gather", lambda x, i: torch.gather(x, 0, i),
      [r(4, 5), NoGrad(torch.randint(0, 4, (2, 3)))], {"dim": 0})
c.add("scatter_add_dim0", "scatter_add", lambda x, i, s: torch.scatter_add(x, 0, i, s),
      [r(3, 4), NoGrad(torch.randint(0, 3, (5, 4))), r(5, 4)], {"dim": 0})
c.add("scatter_add_smaller_index", "scatter_add", lambda x, i, s: torch.scatter_add(x, -1, i, s),
      [r(3, 4), NoGrad(torch.randint(0, 4, (2, 3))), r(2, 3)], {"dim": -1})
c.add("pad_2d", "pad", lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), [r(2, 3, 4)],
      {"pads": [1, 2, 0, 1], "value": 0.5})
c.add("pad_crop", "pad", lambda x: F.pad(x, (-1, 2, 1, -2)), [r(2, 4, 5)], {"pads": [-1, 2, 1, -2], "value": 0})
c.add("tril", "tril", lambda x: torch.tril(x, -1), [r(2, 4, 3)], {"diagonal": -1})
c.add("triu", "triu", lambda x: torch.triu(x, 1), [r(3, 5)], {"diagonal": 1})
c.add("one_hot", "one_hot", lambda i: F.one_hot(i, 6), [NoGrad(torch.randint(0, 6, (2, 3)))], {"num_classes": 6})
c.add("one_hot_inferred", "one_hot", lambda i: F.one_hot(i), [NoGrad(torch.tensor([3, 0, 1]))], {"num_classes": -1})
c.write()
