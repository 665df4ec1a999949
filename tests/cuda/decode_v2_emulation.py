#!/usr/bin/env python3
# Numpy emulation of src/backend/cuda/decode_attention_v2.cu and its planner, written while no
# GPU was at hand: the kernel's index math (lane groups, 1 or 2 vectors per lane, token order,
# the cp.async ring, the double-buffered slot tiles, poisoned when reused), its online softmax,
# the lane/warp merges, the partials and the merge kernel, against a float64 reference. Lanes are
# array rows; a cp.async lands at once (the worst case for ring reuse). It checks the algorithm,
# not the CUDA code: keep it in step when the kernel's indexing changes. Needs numpy (Debian:
# python3-numpy): /usr/bin/python3 tests/cuda/decode_v2_emulation.py
import numpy as np, math, itertools, sys
kWarps, kThreads, kChunks, kStages, kTile = 4, 128, 2, 4, 1024
kNoMax = -1e30

def chunk_for(group): return 1 if group <= 1 else 2 if group <= 2 else 4 if group <= 4 else 8

def plan_v2(lens, H, KV, D, sms=132, P=0):
    group = H // KV; chunks = (group + 7) // 8
    maxlen = max(lens) if lens else 0
    blocks = lambda p: sum(max(1, -(-c // p)) for c in lens) * KV * chunks
    if P == 0:
        P = 16384
        while P > 64 and (P // 2 >= maxlen or blocks(P // 2) <= 3 * sms): P //= 2
    return P, max(1, -(-maxlen // P))

def block(a, kvh, chunk, s, part, TG, GC, VPL, ws):
    E = 8 * VPL; STEPS = kChunks // VPL; TPW = 32 // TG; TI = kWarps * TPW * STEPS
    assert kTile % TI == 0 and TI * (kStages - 1) <= kTile
    D, H, KV, bs, P = a['D'], a['H'], a['KV'], a['bs'], a['P']
    ctx = a['ctx'][s]
    nparts = min(max(1, -(-ctx // P)), a['maxparts'])
    if part >= nparts: return
    start = part * P; n = max(0, min(ctx - start, P))
    G = H // KV; gcount = min(GC, G - chunk * GC); h0 = kvh * G + chunk * GC
    row = a['qs'][s]; table = a['bt'][a['bts'][s]:]
    tid = np.arange(kThreads); warp = tid // 32; lane = tid % 32; lig = lane % TG; tiw = lane // TG
    on = np.stack([(v * TG + lig) * 8 < D for v in range(VPL)], 1)  # [tid, VPL]
    slots = np.full((2, kTile), -12345, dtype=np.int64)
    def fill_tile(tile):
        t0 = tile * kTile; cnt = min(kTile, n - t0)
        for i in range(cnt):
            pos = start + t0 + i; page = pos // bs
            slots[tile & 1, i] = table[page] * bs + (pos - page * bs)
    fill_tile(0)
    if n > kTile: fill_tile(1)
    q = np.zeros((kThreads, GC, E))
    for g in range(GC):
        for v in range(VPL):
            for t in range(kThreads):
                if g < gcount and on[t, v]:
                    e0 = (v * TG + lig[t]) * 8
                    q[t, g, 8*v:8*v+8] = a['q'][row, h0 + g, e0:e0+8] * a['scale_log2']
    ring = np.full((kStages, 2, kChunks, kThreads, 8), np.nan)
    Kc, Vc = a['k'], a['v']  # [slots, KV, D]
    def token(it, u): return it * TI + (warp * STEPS + u) * TPW + tiw
    def issue(it):
        st = it % kStages
        for u in range(STEPS):
            t = token(it, u); ok = t < n
            for v in range(VPL):
                fill = ok & on[:, v]
                for th in range(kThreads):
                    c = u * VPL + v
                    if fill[th]:
                        sl = slots[(t[th] // kTile) & 1, t[th] % kTile]
                        assert sl >= 0, "stale slot"
                        e0 = (v * TG + lig[th]) * 8
                        ring[st, 0, c, th] = Kc[sl, kvh, e0:e0+8]
                        ring[st, 1, c, th] = Vc[sl, kvh, e0:e0+8]
                    else:
                        ring[st, 0, c, th] = 0; ring[st, 1, c, th] = 0
    m = np.full((kThreads, GC), kNoMax); l = np.zeros((kThreads, GC)); acc = np.zeros((kThreads, GC, E))
    iters = -(-n // TI)
    for i in range(kStages - 1):
        if i < iters: issue(i)
    for it in range(iters):
        tok0 = it * TI
        if it > 0 and tok0 % kTile == 0:
            if tok0 + kTile < n:
                slots[((tok0 // kTile) + 1) & 1, :] = -12345  # poison the reused buffer
                fill_tile(tok0 // kTile + 1)
        if it + kStages - 1 < iters: issue(it + kStages - 1)
        st = it % kStages
        sc = np.zeros((STEPS, kThreads, GC))
        for u in range(STEPS):
            kf = np.concatenate([ring[st, 0, u * VPL + v] for v in range(VPL)], 1)  # [tid, E]
            valid = token(it, u) < n
            dot = np.einsum('tge,te->tg', q, kf)
            o = TG // 2
            while o > 0:
                dot = dot + dot[tid ^ o]; o //= 2
            sc[u] = np.where(valid[:, None], dot, -np.inf)
        mx = np.maximum(m, sc.max(0))
        grow = mx > m
        alpha = np.where(grow, np.exp2(m - mx), 1.0)
        m = np.where(grow, mx, m); l = l * alpha; acc = acc * alpha[:, :, None]
        for u in range(STEPS):
            vf = np.concatenate([ring[st, 1, u * VPL + v] for v in range(VPL)], 1)
            p = np.exp2(sc[u] - m)
            l = l + p; acc = acc + p[:, :, None] * vf[:, None, :]
        assert not np.isnan(acc).any()
    if TPW > 1:
        mw = m.copy(); o = TG
        while o < 32: mw = np.maximum(mw, mw[tid ^ o]); o <<= 1
        f = np.exp2(m - mw); m = mw; l = l * f; acc = acc * f[:, :, None]
        o = TG
        while o < 32: l = l + l[tid ^ o]; acc = acc + acc[tid ^ o]; o <<= 1
    red = np.full((kWarps, GC, D), np.nan); wm = np.zeros((kWarps, GC)); wl = np.zeros((kWarps, GC))
    for th in range(kThreads):
        if tiw[th] == 0:
            for g in range(GC):
                for v in range(VPL):
                    if not on[th, v]: continue
                    e0 = (v * TG + lig[th]) * 8
                    red[warp[th], g, e0:e0+8] = acc[th, g, 8*v:8*v+8]
        if lane[th] == 0:
            wm[warp[th]] = m[th]; wl[warp[th]] = l[th]
    for i in range(gcount * D):
        g, d = i // D, i % D; h = h0 + g
        M = max(kNoMax, wm[:, g].max())
        f = np.exp2(wm[:, g] - M); L = (wl[:, g] * f).sum(); o_ = (red[:, g, d] * f).sum()
        if nparts == 1:
            a['out'][row, h, d] = o_ / L if L > 0 else 0
        else:
            pi = (s * H + h) * a['maxparts'] + part
            ws['out'][pi, d] = o_
            if d == 0: ws['m'][pi] = M; ws['l'][pi] = L

def merge(a, ws):
    for s in range(len(a['ctx'])):
        for h in range(a['H']):
            P = a['P']; nparts = min(max(1, -(-a['ctx'][s] // P)), a['maxparts'])
            if nparts <= 1: continue
            base = (s * a['H'] + h) * a['maxparts']
            mm = ws['m'][base:base+nparts]; M = max(kNoMax, mm.max())
            w = np.exp2(mm - M); L = (ws['l'][base:base+nparts] * w).sum()
            o = (ws['out'][base:base+nparts] * w[:, None]).sum(0)
            a['out'][a['qs'][s], h] = o / L

def run(H, KV, D, bs, lens, P=0, lane_vectors=0, seed=0, bound=0):
    rng = np.random.default_rng(seed)
    # bound: plan_decode_attention_bounded (every sequence planned at `bound` tokens)
    P, maxparts = plan_v2([bound] * len(lens) if bound else lens, H, KV, D, P=P)
    nb = sum(-(-c // bs) for c in lens) + 3
    phys = rng.permutation(nb)
    bt, bts = [], [0]
    k = 0
    for c in lens:
        for b in range(-(-c // bs)): bt.append(phys[k]); k += 1
        bts.append(len(bt))
    Kc = rng.uniform(-2, 2, (nb * bs, KV, D)); Vc = rng.uniform(-1, 1, (nb * bs, KV, D))
    q = rng.uniform(-2, 2, (len(lens), H, D))
    scale = 1 / math.sqrt(D)
    a = dict(D=D, H=H, KV=KV, bs=bs, P=P, maxparts=maxparts, ctx=lens, qs=list(range(len(lens))),
             bt=np.array(bt), bts=bts, k=Kc, v=Vc, q=q, scale_log2=scale * math.log2(math.e),
             out=np.full((len(lens), H, D), np.nan))
    G = H // KV; gc = chunk_for(G); nch = -(-G // gc); vecs = D // 8
    VPL = 2 if (lane_vectors != 1 and vecs >= 16 and gc <= 4) else 1
    need = -(-vecs // VPL); TG = 1
    while TG < need: TG *= 2
    n = len(lens) * H * maxparts
    ws = dict(out=np.full((n, D), np.nan), m=np.full(n, np.nan), l=np.full(n, np.nan))
    for kvh, ch, s, part in itertools.product(range(KV), range(nch), range(len(lens)), range(maxparts)):
        block(a, kvh, ch, s, part, TG, gc, VPL, ws)
    if maxparts > 1: merge(a, ws)
    # reference
    ref = np.zeros_like(a['out'])
    for s, c in enumerate(lens):
        pos = np.arange(c); sl = np.array(bt)[bts[s] + pos // bs] * bs + pos % bs
        for h in range(H):
            kk = Kc[sl, h // G]; vv = Vc[sl, h // G]
            sc = kk @ q[s, h] * scale; p = np.exp(sc - sc.max()); ref[s, h] = p @ vv / p.sum()
    err = np.abs(a['out'] - ref).max()
    print(f"{'bounded ' if bound else ''}H{H} KV{KV} D{D} bs{bs} P{P}x{maxparts} TG{TG} GC{gc} VPL{VPL} lens{lens[:4]}: max err {err:.2e}")
    assert err < 1e-9, err

cases = [
    (32, 8, 128, 16, [1, 17, 33, 1000, 300]),
    (32, 8, 128, 16, [31, 1025], 64, 1),
    (4, 2, 16, 16, [1, 17, 130]),
    (6, 3, 16, 1, [33, 65], 32),
    (10, 2, 80, 8, [1, 100, 7], 32),
    (5, 5, 80, 3, [1, 50]),
    (12, 4, 96, 16, [129, 3], 128),
    (8, 1, 256, 32, [100, 1]),
    (16, 2, 256, 16, [70, 5], 64),
    (3, 1, 32, 8, [40, 2]),
    (2, 1, 8, 16, [300, 1], 32),
    (12, 1, 128, 8, [65, 9], 32),
    (8, 2, 128, 16, [3000, 5, 2049], 2048),
    (8, 2, 128, 1, [2500, 7], 4096, 1),
    (8, 2, 64, 16, [2300], 4096),
    (2, 1, 8, 16, [2100], 4096),
    (8, 2, 128, 16, [1, 17, 3000, 2048, 100], 0, 0, 3000),
    (8, 2, 128, 16, [16, 1025, 129, 2999, 64], 2048, 0, 3000),
    (8, 2, 128, 16, [2, 3, 33, 513, 2047], 0, 1, 3000),
]
for c in cases:
    H, KV, D, bs, lens = c[:5]
    P = c[5] if len(c) > 5 else 0; lv = c[6] if len(c) > 6 else 0
    bound = c[7] if len(c) > 7 else 0
    run(H, KV, D, bs, lens, P, lv, bound=bound)
print("all ok")
