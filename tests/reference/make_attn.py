#!/usr/bin/python3
"""Reference cases for layer_norm, group_norm, scaled_dot_product_attention and
multi-head attention (tests/nn/test_torch_attn.cpp).

PyTorch 1.13 has no F.scaled_dot_product_attention: `sdpa` below is the
reference implementation PyTorch 2 documents for it. Boolean masks are int64
inputs here (minidl has no bool dtype): nonzero = True, with PyTorch's meaning
for each mask (sdpa's attn_mask: True takes part; MultiheadAttention's
key_padding_mask and attn_mask: True is masked out).
"""
import math

import torch
import torch.nn.functional as F

from torch_cases import Cases, NoGrad

c = Cases("attn")
r = torch.randn

# ---- layer_norm: inputs x[, weight, bias]; attrs normalized_shape, eps ----
c.add("layer_norm_last", "layer_norm", lambda x, w, b: F.layer_norm(x, [5], w, b),
      [r(4, 5) * 3 + 1, r(5), r(5)], {"normalized_shape": [5], "eps": 1e-5})
c.add("layer_norm_last_two", "layer_norm", lambda x, w, b: F.layer_norm(x, [3, 4], w, b, 1e-3),
      [r(2, 3, 4), r(3, 4), r(3, 4)], {"normalized_shape": [3, 4], "eps": 1e-3})
c.add("layer_norm_no_affine", "layer_norm", lambda x: F.layer_norm(x, [4, 5]),
      [r(2, 3, 4, 5)], {"normalized_shape": [4, 5], "eps": 1e-5})
c.add("layer_norm_1d", "layer_norm", lambda x, w, b: F.layer_norm(x, [6], w, b),
      [r(6), r(6), r(6)], {"normalized_shape": [6], "eps": 1e-5})

# ---- group_norm: inputs x[, weight, bias]; attrs num_groups, eps ----
c.add("group_norm_nchw", "group_norm", lambda x, w, b: F.group_norm(x, 3, w, b),
      [r(2, 6, 3, 4) * 2, r(6), r(6)], {"num_groups": 3, "eps": 1e-5})
c.add("group_norm_ncl", "group_norm", lambda x, w, b: F.group_norm(x, 2, w, b, 1e-3),
      [r(3, 4, 5), r(4), r(4)], {"num_groups": 2, "eps": 1e-3})
c.add("group_norm_one_group_no_affine", "group_norm", lambda x: F.group_norm(x, 1),
      [r(2, 4, 3)], {"num_groups": 1, "eps": 1e-5})
c.add("group_norm_instance", "group_norm", lambda x, w, b: F.group_norm(x, 4, w, b),
      [r(2, 4, 2, 3), r(4), r(4)], {"num_groups": 4, "eps": 1e-5})


# ---- scaled_dot_product_attention: inputs q, k, v[, attn_mask]; attrs is_causal, mask ----
def sdpa(q, k, v, mask=None, is_causal=False):
    L, S = q.size(-2), k.size(-2)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if is_causal:
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        s = s + mask if mask.is_floating_point() else s.masked_fill(mask == 0, float("-inf"))
    return torch.softmax(s, -1) @ v


c.add("sdpa_3d", "sdpa", sdpa, [r(2, 3, 4), r(2, 5, 4), r(2, 5, 6)], {})
c.add("sdpa_4d_causal", "sdpa", lambda q, k, v: sdpa(q, k, v, is_causal=True),
      [r(2, 2, 4, 3), r(2, 2, 4, 3), r(2, 2, 4, 5)], {"is_causal": True})
c.add("sdpa_causal_l_lt_s", "sdpa", lambda q, k, v: sdpa(q, k, v, is_causal=True),
      [r(2, 3, 4), r(2, 5, 4), r(2, 5, 4)], {"is_causal": True})
c.add("sdpa_float_mask", "sdpa", sdpa, [r(2, 2, 3, 4), r(2, 2, 5, 4), r(2, 2, 5, 4), NoGrad(r(3, 5))],
      {"mask": "float"})
c.add("sdpa_float_mask_per_batch", "sdpa", sdpa,
      [r(2, 2, 3, 4), r(2, 2, 5, 4), r(2, 2, 5, 4), NoGrad(r(2, 1, 3, 5) * 2)], {"mask": "float"})
c.add("sdpa_bool_mask", "sdpa", sdpa,
      [r(2, 3, 4), r(2, 5, 4), r(2, 5, 2),
       NoGrad(torch.tensor([[1, 1, 0, 1, 0], [0, 1, 1, 1, 1], [1, 0, 0, 0, 0]]))], {"mask": "bool"})


# ---- multi-head attention: inputs q, k, v, then the parameters named in attrs
# "params" (PyTorch's state_dict names: in_proj_weight or q/k/v_proj_weight,
# in_proj_bias[, bias_k, bias_v], out_proj.weight, out_proj.bias)[,
# key_padding_mask][, attn_mask]; attrs below. N=None: unbatched ----
def mha_case(name, E, H, L, S, N, batch_first=False, kpm=None, mask=None, need_weights=True,
             average=True, kdim_same=True, kdim=None, vdim=None, bias_kv=False, zero_attn=False,
             is_causal=False):
    kd, vd = kdim or E, vdim or E
    lead = (lambda n: (n,)) if N is None else (lambda n: (N, n) if batch_first else (n, N))
    q, k, v = r(*lead(L), E), r(*lead(S), kd), r(*lead(S), vd)
    if kdim_same == "self":
        k = v = q
    separate = kd != E or vd != E
    params = {}
    if separate:
        params["q_proj_weight"] = r(E, E) / math.sqrt(E)
        params["k_proj_weight"] = r(E, kd) / math.sqrt(kd)
        params["v_proj_weight"] = r(E, vd) / math.sqrt(vd)
    else:
        params["in_proj_weight"] = r(3 * E, E) / math.sqrt(E)
    params["in_proj_bias"] = r(3 * E) * 0.1
    if bias_kv:
        params["bias_k"], params["bias_v"] = r(1, 1, E), r(1, 1, E)
    params["out_proj.weight"], params["out_proj.bias"] = r(E, E) / math.sqrt(E), r(E) * 0.1
    with torch.random.fork_rng():  # PyTorch's module takes exactly these names and shapes
        torch.nn.MultiheadAttention(E, H, add_bias_kv=bias_kv, add_zero_attn=zero_attn, kdim=kd,
                                    vdim=vd).load_state_dict(params)
    names = list(params)
    inputs = [q, k, v] + [params[n] for n in names]
    attrs = {"num_heads": H, "batch_first": batch_first, "need_weights": need_weights,
             "average_attn_weights": average, "params": names, "add_zero_attn": zero_attn,
             "is_causal": is_causal}
    if kpm is not None:
        attrs["key_padding_mask"] = len(inputs)
        inputs.append(NoGrad(kpm))
    if mask is not None:
        attrs["attn_mask"] = len(inputs)
        inputs.append(NoGrad(mask))

    def fn(q, k, v, *rest):
        p = dict(zip(names, rest[:len(names)]))
        m = list(rest[len(names):])
        kp = m.pop(0) if kpm is not None else None
        am = m.pop(0) if mask is not None else None
        if kp is not None and not kp.is_floating_point():
            kp = kp != 0
        if am is not None and not am.is_floating_point():
            am = am != 0
        if is_causal:  # minidl's is_causal: this triangle over the S given keys (1.13 has none)
            assert am is None
            am = torch.ones(L, S, dtype=torch.bool).triu(1)
        if batch_first:
            q, k, v = (t.transpose(0, 1) for t in (q, k, v))
        out, w = F.multi_head_attention_forward(
            q, k, v, E, H, p.get("in_proj_weight"), p["in_proj_bias"], p.get("bias_k"),
            p.get("bias_v"), zero_attn, 0.0, p["out_proj.weight"], p["out_proj.bias"],
            training=False, key_padding_mask=kp, need_weights=need_weights, attn_mask=am,
            use_separate_proj_weight=separate, q_proj_weight=p.get("q_proj_weight"),
            k_proj_weight=p.get("k_proj_weight"), v_proj_weight=p.get("v_proj_weight"),
            average_attn_weights=average)
        if batch_first:
            out = out.transpose(0, 1)
        return (out, w) if need_weights else out

    c.add(name, "mha", fn, inputs, attrs)


mha_case("mha_seq_first", E=8, H=2, L=3, S=4, N=2)
mha_case("mha_batch_first", E=6, H=3, L=4, S=2, N=3, batch_first=True)
mha_case("mha_self_attention", E=4, H=1, L=3, S=3, N=2, batch_first=True, kdim_same="self")
mha_case("mha_key_padding_mask_bool", E=8, H=4, L=2, S=4, N=2, batch_first=True,
         kpm=torch.tensor([[0, 0, 1, 1], [0, 0, 0, 1]]))
mha_case("mha_key_padding_mask_float", E=8, H=2, L=3, S=4, N=2, kpm=r(2, 4))
mha_case("mha_attn_mask_float_2d", E=8, H=2, L=3, S=4, N=2, batch_first=True, mask=r(3, 4))
mha_case("mha_attn_mask_bool_causal", E=6, H=2, L=3, S=3, N=2,
         mask=torch.ones(3, 3, dtype=torch.int64).triu(1))
mha_case("mha_attn_mask_3d_and_kpm", E=4, H=2, L=2, S=3, N=2, batch_first=True,
         kpm=torch.tensor([[0, 0, 1], [0, 0, 0]]), mask=r(4, 2, 3))
mha_case("mha_weights_per_head", E=8, H=2, L=3, S=4, N=2, average=False)
mha_case("mha_no_weights", E=8, H=4, L=3, S=2, N=1, batch_first=True, need_weights=False)
# kdim/vdim (separate projection weights), add_bias_kv, add_zero_attn
mha_case("mha_kdim_vdim_seq_first", E=8, H=2, L=3, S=4, N=2, kdim=5, vdim=3)
mha_case("mha_kdim_vdim_batch_first_masks", E=6, H=3, L=2, S=3, N=2, batch_first=True, kdim=4,
         vdim=7, kpm=torch.tensor([[0, 1, 0], [0, 0, 0]]), mask=r(2, 3))
mha_case("mha_vdim_only", E=4, H=2, L=2, S=3, N=2, vdim=2, average=False)
mha_case("mha_bias_kv_masks", E=8, H=2, L=3, S=4, N=2, bias_kv=True,
         kpm=torch.tensor([[0, 0, 1, 1], [0, 0, 0, 1]]),
         mask=torch.ones(3, 4, dtype=torch.int64).triu(1))
mha_case("mha_bias_kv_batch_first_3d_mask", E=4, H=2, L=2, S=3, N=2, batch_first=True,
         bias_kv=True, kpm=torch.tensor([[0, 0, 1], [0, 0, 0]]), mask=r(4, 2, 3))
mha_case("mha_zero_attn_masks", E=6, H=2, L=3, S=3, N=2, zero_attn=True,
         kpm=torch.tensor([[0, 1, 1], [0, 0, 0]]), mask=torch.ones(3, 3, dtype=torch.int64).triu(1),
         average=False)
mha_case("mha_zero_attn_float_kpm", E=4, H=1, L=2, S=3, N=2, batch_first=True, zero_attn=True,
         kpm=r(2, 3))
mha_case("mha_bias_kv_zero_attn", E=8, H=2, L=3, S=4, N=2, bias_kv=True, zero_attn=True,
         kpm=torch.tensor([[0, 0, 0, 1], [1, 0, 0, 0]]), mask=r(3, 4))
mha_case("mha_all_options_batch_first", E=6, H=2, L=3, S=2, N=2, batch_first=True, kdim=4,
         vdim=5, bias_kv=True, zero_attn=True, kpm=torch.tensor([[0, 1], [0, 0]]),
         mask=torch.randint(0, 2, (4, 3, 2)), average=False)  # whole rows masked: the extra keys stay
mha_case("mha_all_options_unbatched", E=4, H=2, L=2, S=3, N=None, kdim=3, vdim=2, bias_kv=True,
         zero_attn=True, kpm=torch.tensor([0, 0, 1]), mask=r(2, 3))
mha_case("mha_is_causal_bias_kv_zero_attn", E=4, H=2, L=3, S=3, N=2, bias_kv=True, zero_attn=True,
         kpm=torch.tensor([[0, 0, 1], [0, 0, 0]]), is_causal=True, average=False)
c.write()
