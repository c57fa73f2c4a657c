#!/usr/bin/env bash
# A model of what limits the fused CPU step's hot loops on each core (docs/performance.md,
# "What limits the step on each core"). Analysis only: not part of the build, the tests or
# CI, and it needs no network.
#
# Why: the step reaches 38% of the FMA peak on Zen 4 but 14-20% on Intel Emerald Rapids and
# 17% on Zen 5, and the Intel machine ran as fast on its 8-lane kernels as on its 16-lane
# ones. This script asks, loop by loop, whether the limit is the accumulators' dependency
# chains (an FMA's latency, loop-carried) or the FMA pipes' throughput (or the loads).
#
# What it does:
#  1. compiles scripts/mca_driver.cpp (src/model/cpu_layers.h unchanged, its kernels in the
#     build's flags: -O3 -DNDEBUG -std=c++17 -fno-math-errno, each variant through the
#     header's own target attributes) to assembly, $OUT/driver.s;
#  2. finds every single-block innermost loop of the build's product functions
#     (matmul_x86_64_v3 / _v4, emitted in the same file, and checked to be the same
#     instructions as build/'s fused_cpu.cpp.o when there is one) and of the driver's other
#     kernels (the tiles it times, the softmax's, its backward's and the cross-entropy's
#     loops); marks each with LLVM-MCA-BEGIN / LLVM-MCA-END in $OUT/driver.marked.s and writes
#     it alone to $OUT/loops/<function>.<label>.s; sorts the product loops by tile (R rows x NV
#     vectors of accumulators, lanes, A read contiguously or strided);
#  3. runs `llvm-mca -mcpu=<cpu> -iterations=100 -timeline -bottleneck-analysis` on each
#     loop for znver3 (the x86-64-v3 loops only: Zen 3 has no AVX-512), icelake-server and
#     sapphirerapids (LLVM 14's sapphirerapids entry reuses the Skylake-server model, SKXPort*),
#     keeping each report in $OUT/mca/;
#  4. for Zen 3, Zen 4 and Zen 5 estimates each product loop from a few per-instruction
#     numbers, set below as assumptions (LLVM 14 has no Zen 4 or Zen 5 model, and its znver3
#     model gives a ymm FMA half the throughput the timing in 6 finds);
#  5. prints the loop table, then the reference study's products per group (G = 4 examples:
#     T = 10, D = 20, F = 32, V = 11, one head, two blocks) with each core's tiles, their
#     k-loop cycles and the share of the FMA peak those loops allow; then the same for the
#     step's products since its blocks went across the lanes (lanes_linear_x86_64_v3 / _v4 and
#     lanes_product_x86_64_v3 / _v4, also checked against build/'s object): their k-loops by
#     tile, and a group of 16 examples' products with each core's tiles (docs/performance.md,
#     "The products across the lanes, modelled");
#  6. times the x86-64-v3 tiles here (one thread, a few seconds) and prints them beside
#     llvm-mca's znver3 numbers, when this CPU has AVX2 and FMA (TIME=0 skips it); the
#     driver also times a group's products through the build's lanes functions, their tiles'
#     loads, stores and calls included (about 40 s in all).
#
#   scripts/mca_model.sh               # everything, in /tmp/mca
#   OUT=/tmp/elsewhere TIME=0 scripts/mca_model.sh
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-/tmp/mca}
TIME=${TIME:-1}
CXX=${CXX:-g++}
MCA=${MCA:-$(command -v llvm-mca-14 || command -v llvm-mca)}
mkdir -p "$OUT"
rm -rf "$OUT/loops" "$OUT/mca"
mkdir -p "$OUT/loops" "$OUT/mca"

# 1. The assembly, with the build's flags (build/compile_commands.json: -O3 -DNDEBUG
#    -std=c++17 -fno-math-errno; no -march: the variants come from the target attributes).
"$CXX" -O3 -DNDEBUG -std=c++17 -fno-math-errno -Wno-psabi -Isrc -S -o "$OUT/driver.s" scripts/mca_driver.cpp
"$CXX" -o "$OUT/driver" "$OUT/driver.s"
# The product functions here against the build's, instruction by instruction (registers and
# addresses aside), when there is a build.
object=build/CMakeFiles/copytask_model.dir/src/model/fused_cpu.cpp.o
for f in _ZN8copytask3cpu16matmul_x86_64_v3ERKNS0_7ProductE _ZN8copytask3cpu16matmul_x86_64_v4ERKNS0_7ProductE \
  _ZN8copytask3cpu22lanes_linear_x86_64_v3ERKNS0_11LanesLinearE _ZN8copytask3cpu22lanes_linear_x86_64_v4ERKNS0_11LanesLinearE \
  _ZN8copytask3cpu23lanes_product_x86_64_v3ERKNS0_12LanesProductE _ZN8copytask3cpu23lanes_product_x86_64_v4ERKNS0_12LanesProductE; do
  if [ -f "$object" ]; then
    mnemonics() { objdump -d --no-show-raw-insn --disassemble="$f" "$1" | awk '/^ +[0-9a-f]+:/ {print $2}' | md5sum; }
    if [ "$(mnemonics "$object")" = "$(mnemonics "$OUT/driver")" ]; then same="the same instructions as"
    else same="NOT the same instructions as (rebuilt since? other flags?)"; fi
    echo "$(c++filt "$f") here: $same $object"
  fi
done

# 2-5 in Python (the standard library only).
python3 - "$OUT" "$MCA" <<'PY'
import os, re, subprocess, sys

out, mca = sys.argv[1], sys.argv[2]
lines = open(os.path.join(out, 'driver.s')).read().split('\n')

def func_range(name):
    start = lines.index(name + ':')
    end = next(i for i in range(start, len(lines)) if lines[i].strip() == '.cfi_endproc')
    return start, end

def is_insn(l):
    s = l.strip()
    return bool(s) and not s.startswith('.') and not s.endswith(':') and not s.startswith('#')

def single_block_loops(name):
    """Innermost loops of a function whose body is one basic block: (start, end, label, body)."""
    a, b = func_range(name)
    labels = {}
    for i in range(a, b):
        m = re.match(r'^(\.L\w+):', lines[i])
        if m: labels[m.group(1)] = i
    found = []
    for i in range(a, b):
        m = re.match(r'^\s+(j\w+)\s+(\.L\w+)$', lines[i])
        if not (m and m.group(2) in labels and labels[m.group(2)] < i): continue
        s = labels[m.group(2)]
        body = [lines[k].strip() for k in range(s + 1, i + 1) if is_insn(lines[k])]
        branches = [x for x in body if x.split()[0].startswith('j') or x.split()[0] in ('call', 'ret')]
        inner_labels = [k for k in range(s + 1, i) if re.match(r'^\.L\w+:', lines[k])]
        if len(branches) == 1 and not inner_labels:
            found.append((s, i, m.group(2)[2:], body))
    return found

# The build's product functions (the same instructions as build/'s fused_cpu.cpp.o: see the
# check below) and the driver's own kernel functions.
build_products = {'v3': '_ZN8copytask3cpu16matmul_x86_64_v3ERKNS0_7ProductE',
                  'v4': '_ZN8copytask3cpu16matmul_x86_64_v4ERKNS0_7ProductE'}
kernels = [l.rstrip(':') for l in lines if re.match(r'^(tile_v3|softmax|crossentropy)\w*:$', l)]

def tile_class(variant, body):
    """(variant, lanes, R, NV, A contiguous) of a product loop: R rows of A broadcast (vbroadcastss
    or an FMA's {1toN}), NV vectors of B, one FMA per row and vector."""
    fma = [x for x in body if x.startswith('vfmadd')]
    if not fma: return None
    W = 16 if '%zmm' in fma[0] else 8
    R = sum(1 for x in body if x.startswith('vbroadcastss')) + sum(1 for x in fma if '{1to' in x)
    contiguous = any(re.match(r'addq\s+\$4, %', x) for x in body)  # A's pointer steps one float
    return (variant, W, R, len(fma) // R, contiguous)

# The step's products since the blocks went across the lanes (cpu_lanes_layers.h,
# cpu_attention_lanes.h): (variant, kind) -> function.
lanes_products = {('v3', 'linear'): '_ZN8copytask3cpu22lanes_linear_x86_64_v3ERKNS0_11LanesLinearE',
                  ('v4', 'linear'): '_ZN8copytask3cpu22lanes_linear_x86_64_v4ERKNS0_11LanesLinearE',
                  ('v3', 'product'): '_ZN8copytask3cpu23lanes_product_x86_64_v3ERKNS0_12LanesProductE',
                  ('v4', 'product'): '_ZN8copytask3cpu23lanes_product_x86_64_v4ERKNS0_12LanesProductE'}
LANES_ROWS = {'v3': (2, 1), 'v4': (5, 1)}  # LanesTileShape's R, and single rows
LANES_SHAPE = {'v3': (8, 2, 5), 'v4': (16, 5, 4)}  # lanes a vector, LanesTileShape's R and NO

def lanes_class(variant, kind, body):
    """(variant, lanes, R, NO, kind) of a lanes tile's k-loop: R vectors of A, and NO weights
    broadcast (kind 'linear') or NO vectors of B ('product'), R x NO FMAs; each operand loaded
    once a k, or once for each FMA where the compiler folds its load into them. A product's
    R x NO and NO x R load and multiply the same, so where both fit the larger R is taken."""
    fma = [x for x in body if x.startswith('vfmadd')]
    if not fma: return None
    n, W = len(fma), 16 if any('%zmm' in x for x in fma) else 8
    vec = bro = 0
    for x in body:
        op, _, args = x.partition('\t')
        m = re.match(r'[^,(]*\([^)]*\)(\{1to\d+\})?', args.strip())  # a memory source (AT&T: first)
        if not m or not op.startswith('v'): continue
        if op == 'vbroadcastss' or m.group(1): bro += 1
        else: vec += 1
    for R in LANES_ROWS[variant]:
        NO = n // R
        if n % R or NO > LANES_SHAPE[variant][2]: continue
        if kind == 'linear' and vec in (R, n) and bro in (NO, n): return (variant, W, R, NO, kind)
        if kind == 'product' and bro == 0 and vec in (R + NO, n + NO, R + n): return (variant, W, R, NO, kind)
    return None

loops = []  # dicts: name, function, body, cls (the tile class, or None)
marks = {}
sources = [(variant, f, None) for variant, f in build_products.items()] + \
    [(variant, f, kind) for (variant, kind), f in lanes_products.items()] + [(None, k, None) for k in kernels]
for variant, f, kind in sources:
    for s, e, label, body in single_block_loops(f):
        short = {'v3': 'matmul_x86_64_v3', 'v4': 'matmul_x86_64_v4'}.get(variant, f) if kind is None else \
            'lanes_%s_x86_64_%s' % (kind, variant)
        name = '%s.%s' % (short, label)
        marks[s] = '# LLVM-MCA-BEGIN %s' % name
        marks[e] = '# LLVM-MCA-END %s' % name
        open(os.path.join(out, 'loops', name + '.s'), 'w').write('\n'.join(body) + '\n')
        m = re.match(r'tile_(v\d)_', f)
        if kind:
            cls = lanes_class(variant, kind, body)
        else:
            cls = tile_class(variant or (m.group(1) if m else None), body) if (variant or m) else None
        loops.append({'name': name, 'function': f, 'body': body, 'cls': cls, 'build': variant is not None,
                      'lanes': kind is not None})
with open(os.path.join(out, 'driver.marked.s'), 'w') as marked:
    for i, l in enumerate(lines):
        marked.write(l + '\n' + (marks[i] + '\n' if i in marks else ''))

# ---- llvm-mca ----------------------------------------------------------------------------
CPUS = ['znver3', 'icelake-server', 'sapphirerapids']
def run_mca(loop, cpu):
    path = os.path.join(out, 'loops', loop['name'] + '.s')
    report = subprocess.run([mca, '-mtriple=x86_64', '-mcpu=' + cpu, '-iterations=100', '-timeline',
                             '-bottleneck-analysis', path], capture_output=True, text=True).stdout
    open(os.path.join(out, 'mca', '%s.%s.txt' % (loop['name'], cpu)), 'w').write(report)
    cycles = int(re.search(r'Total Cycles:\s+(\d+)', report).group(1))
    return cycles / 100.0

# The latencies the LLVM 14 models give the chain's instructions (what their chains are made of).
def model_latency(cpu, insn):
    report = subprocess.run([mca, '-mtriple=x86_64', '-mcpu=' + cpu, '-instruction-info'], input=insn + '\n',
                            capture_output=True, text=True).stdout
    m = re.search(r'^\s*\d+\s+(\d+)\s+([\d.]+)\s', report, re.M)
    return int(m.group(1)), float(m.group(2))

# ---- Zen 4 and Zen 5: estimates from per-instruction numbers (assumptions, not a model) ------
# (Zen 3 too: LLVM 14's znver3 model gives a ymm FMA a throughput of one a cycle, where Zen 3
# has two 256-bit FMA pipes; the timing at the end checks which is right.)
# vfmadd231ps: latency 4 on all three; Zen 3 and Zen 4 issue two ymm FMAs a cycle and one zmm (a zmm op
# takes both 256-bit pipes); Zen 5 two of either. Loads: 3 a cycle, a zmm load counting twice
# on Zen 4 (broadcasts and scalar reloads count once). Dispatch: 6 (Zen 4) and 8 (Zen 5)
# instructions a cycle. The loop's time is the largest of these bounds.
ZEN = {'zen3': {'fma_lat': 4, 'fma_per_cycle': {8: 2.0}, 'loads': 3.0, 'zmm_load_cost': 2, 'dispatch': 6},
       'zen4': {'fma_lat': 4, 'fma_per_cycle': {8: 2.0, 16: 1.0}, 'loads': 3.0, 'zmm_load_cost': 2, 'dispatch': 6},
       'zen5': {'fma_lat': 4, 'fma_per_cycle': {8: 2.0, 16: 2.0}, 'loads': 3.0, 'zmm_load_cost': 1, 'dispatch': 8}}

def loads_of(body):
    """(vector loads, broadcasts, scalar loads) of a loop body, AT&T syntax (source first)."""
    vec = bro = scalar = 0
    for x in body:
        op, _, args = x.partition('\t')
        if '(' not in args or args.rstrip().endswith(')'): continue  # no memory source (or a store)
        if op == 'vbroadcastss' or '{1to' in args: bro += 1
        elif op.startswith('v'): vec += 1
        else: scalar += 1
    return vec, bro, scalar

def zen_estimate(loop, core):
    z = ZEN[core]
    W = loop['cls'][1]
    fma = sum(1 for x in loop['body'] if x.startswith('vfmadd'))
    vec, bro, scalar = loads_of(loop['body'])
    bounds = {'latency': z['fma_lat'],
              'FMA pipes': fma / z['fma_per_cycle'][W],
              'loads': (vec * (z['zmm_load_cost'] if W == 16 else 1) + bro + scalar) / z['loads'],
              'dispatch': len(loop['body']) / z['dispatch']}
    which = max(bounds, key=bounds.get)
    return bounds[which], which

# ---- The loop table -------------------------------------------------------------------------
lat = {c: [model_latency(c, i)[0] for i in ('vfmadd231ps %ymm1, %ymm2, %ymm0', 'vaddss %xmm1, %xmm0, %xmm0',
                                            'vmaxss %xmm1, %xmm0, %xmm0')] for c in CPUS}
print('LLVM 14 latencies (cycles): ' + '; '.join(
    '%s: vfmadd231ps %d, vaddss %d, vmaxss %d' % (c, *lat[c]) for c in CPUS))
print()
results = {}
for loop in loops:
    avx512 = any('%zmm' in x or '{1to' in x or '%k' in x for x in loop['body']) or loop['function'].endswith('_v4') \
        or loop['function'] == build_products['v4']
    loop['avx512'] = avx512
    r = {c: (None if c == 'znver3' and avx512 else run_mca(loop, c)) for c in CPUS}
    if loop['cls'] and loop['cls'][0] == 'v4':
        r['zen4'], r['zen5'] = zen_estimate(loop, 'zen4'), zen_estimate(loop, 'zen5')
    if loop['cls'] and loop['cls'][0] == 'v3':
        r['zen3'] = zen_estimate(loop, 'zen3')
    results[loop['name']] = r

def fmt(x):
    if x is None: return ''
    return '%.2f (%s)' % x if isinstance(x, tuple) else '%.2f' % x

def span(xs, key=lambda x: x):
    xs = [key(x) for x in xs if x is not None]
    if not xs: return ''
    return '%.2f' % min(xs) if max(xs) - min(xs) < 0.05 else '%.2f-%.2f' % (min(xs), max(xs))

# The build's product loops by tile class: (variant, lanes, R, NV, A contiguous).
classes = {}
for loop in loops:
    if loop['build'] and loop['cls'] and not loop['lanes']: classes.setdefault(loop['cls'], []).append(loop)
hdr = ['tile (variant, lanes, R x NV, A)', 'copies', 'insns', 'FMAs', 'chains', 'reloads', 'znver3',
       'icelake-server', 'sapphirerapids', 'Zen 3 est.', 'Zen 4 est.', 'Zen 5 est.']
def table_head(hdr):
    print('| ' + ' | '.join(hdr) + ' |')
    print('|' + '---|' * len(hdr))

def zen_cell(rs, core):
    """A core's estimate over a tile's copies: the cycles' span and what bounds them."""
    if core not in rs[0]: return ''
    return '%s (%s)' % (span(rs, lambda r: r[core][0]), '/'.join(sorted({r[core][1] for r in rs})))

print('The build\'s product loops (matmul_x86_64_v3 / _v4), by tile; cycles per k iteration:')
table_head(hdr)
for cls in sorted(classes):
    ls = classes[cls]
    v, W, R, NV, contiguous = cls
    rs = [results[l['name']] for l in ls]
    zen = lambda core: zen_cell(rs, core)
    reloads = sorted({sum(1 for x in l['body'] if re.search(r'\(%rsp\)', x)) for l in ls})
    print('| %s w%d %dx%d %s | %d | %s | %d | %d | %s | %s | %s | %s | %s |' % (
        v, W, R, NV, 'contiguous' if contiguous else 'strided', len(ls),
        span([len(l['body']) for l in ls]).replace('.00', ''), R * NV, R * NV,
        '/'.join(map(str, reloads)), ' | '.join(span([r[c] for r in rs]) for c in CPUS), zen('zen3'), zen('zen4'), zen('zen5')))
print()
print('copies: the loops of that tile in the function (one per start, partial vector and A stride the')
print('compiler kept apart); chains: R x NV accumulators, each one FMA a k (the loop-carried chain: one')
print('FMA latency a k); reloads: loads from the stack a k (registers the function ran out of).')
print()
print('The other loops (the driver\'s tiles and the softmax\'s and cross-entropy\'s loops, in the same flags):')
print('| loop | insns | znver3 | icelake-server | sapphirerapids | first instructions |')
print('|---|---|---|---|---|---|')
for loop in loops:
    if loop['build']: continue
    r = results[loop['name']]
    print('| %s | %d | %s | %s |' % (loop['name'], len(loop['body']), ' | '.join(fmt(r[c]) for c in CPUS),
                                     ' '.join(x.split()[0] for x in loop['body'][:8])))
print()

# ---- The reference study's products, per group of G = 4 examples ----------------------------
T, D, F, V, G, L = 10, 20, 32, 11, 4, 2
rows = G * T
# (layer, product, rows, K, O, A read contiguously (a_red == 1), times a group)
products = [('QKV projection', 'forward', rows, D, 3 * D, True, L),
            ('attention scores', 'forward q k^T', T, D, T, True, L * G),
            ('attention-weighted values', 'forward w v', T, T, D, True, L * G),
            ('output projection', 'forward', rows, D, D, True, L),
            ('feed-forward up (fc1)', 'forward', rows, D, F, True, L),
            ('feed-forward down (fc2)', 'forward', rows, F, D, True, L),
            ('head', 'forward', rows, D, V, True, 1),
            ('head', 'grad W', D, rows, V, False, 1),
            ('head', 'grad in', rows, V, D, True, 1),
            ('feed-forward down (fc2)', 'grad W', F, rows, D, False, L),
            ('feed-forward down (fc2)', 'grad in', rows, D, F, True, L),
            ('feed-forward up (fc1)', 'grad W', D, rows, F, False, L),
            ('feed-forward up (fc1)', 'grad in', rows, F, D, True, L),
            ('output projection', 'grad W', D, rows, D, False, L),
            ('output projection', 'grad in', rows, D, D, True, L),
            ('attention-weighted values', 'd weights = g v^T', T, D, T, True, L * G),
            ('attention-weighted values', 'd v = w^T g', T, T, D, False, L * G),
            ('attention scores', 'd q = ds k', T, T, D, True, L * G),
            ('attention scores', 'd k = ds^T q', T, T, D, False, L * G),
            ('QKV projection', 'grad W', D, rows, 3 * D, False, L),
            ('QKV projection', 'grad in', rows, 3 * D, D, True, L)]

def row_blocks(n, vectors, accumulators):
    # matmul_blocks: tens or eights that divide the rows where a row is one or two vectors and
    # the variant's accumulators hold them (MaxRows 10 on both AVX variants); else fives where 5
    # divides the rows and 4 does not, else fours and the rest.
    for R in (10, 8):
        if vectors <= 2 and R * vectors <= accumulators and n % R == 0: return [(R, n // R)]
    if n % 5 == 0 and n % 4 != 0: return [(5, n // 5)]
    b = [(4, n // 4)] if n >= 4 else []
    return b + ([(n % 4, 1)] if n % 4 else [])

def tile_vectors(left, max_nv):
    # cpu_layers.h's tile_vectors: all the vectors left when they fit, else max_nv, but never
    # one left alone where two tiles can share the last vectors.
    if left <= max_nv: return left
    if left - max_nv == 1: return max_nv - 1 if max_nv - 1 >= 2 else max_nv
    return max_nv

def col_tiles(O, W, max_nv):
    # matmul_rows: tiles of tile_vectors' widths along the columns.
    left, t = -(-O // W), []
    while left:
        nv = tile_vectors(left, max_nv)
        t.append((nv, 1))
        left -= nv
    return t

# Each core: its variant, its lanes and the most vectors a tile of R rows takes for O columns
# (matmul_x86_64_v3 / _v4's MaxNV and Accumulators), its FMA peak (flop a cycle) and where its
# loop cycles come from.
ACCUMULATORS = {'v3': 12, 'v4': 20}
def v3_tiles(O, R): return 8, min(3, 12 // R)
def v4_tiles(W): return lambda O, R: (W(O), min(4, 20 // R))
CORES = [('Zen 3 (v3)', 'v3', v3_tiles, 32, 'zen3'),
         ('Intel (v4)', 'v4', v4_tiles(lambda O: 16), 64, 'sapphirerapids'),
         ('Intel (v3)', 'v3', v3_tiles, 32, 'sapphirerapids'),
         ('Zen 4 (v4)', 'v4', v4_tiles(lambda O: 8 if -(-O // 8) * 8 < -(-O // 16) * 16 else 16), 32, 'zen4'),
         ('Zen 5 (v4)', 'v4', v4_tiles(lambda O: 16), 64, 'zen5')]

def class_cycles(cls, source):
    # The mean over the tile's copies (they differ by a stack reload or two at most).
    xs = [results[l['name']][source] for l in classes.get(cls, [])]
    xs = [x[0] if isinstance(x, tuple) else x for x in xs if x is not None]
    if not xs: raise SystemExit('no loop of tile %s in the build\'s functions' % (cls,))
    return sum(xs) / len(xs)

print('The reference study\'s products for one group of %d examples (k-loops only):' % G)
print('| layer | product | rows x K x O (times a group) | ' + ' | '.join(
    '%s tiles | cycles | share' % c[0] for c in CORES) + ' |')
print('|' + '---|' * (3 + 3 * len(CORES)))
total_flops, total_cycles = 0, {c[0]: 0.0 for c in CORES}
for layer, what, n, K, O, contiguous, times in products:
    flops = 2 * n * K * O * times
    total_flops += flops
    cells = []
    for cname, variant, lanes, peak, source in CORES:
        cycles, tiles = 0.0, []
        W = lanes(O, 4)[0]
        for R, nblocks in row_blocks(n, -(-O // W), ACCUMULATORS[variant]):
            W, max_nv = lanes(O, R)
            for NV, ntiles in col_tiles(O, W, max_nv):
                cycles += nblocks * ntiles * K * times * class_cycles((variant, W, R, NV, contiguous), source)
                tiles.append('%dx%d' % (R, NV))
        total_cycles[cname] += cycles
        cells += ['%s w%d' % ('+'.join(sorted(set(tiles))), lanes(O, 4)[0]), '%.0f' % cycles, '%.0f%%' % (100 * flops / peak / cycles)]
    print('| %s | %s | %d x %d x %d (x%d) | %s |' % (layer, what, n, K, O, times, ' | '.join(cells)))
print('| all products | | %d flop | %s |' % (total_flops, ' | '.join(
    ' | %.0f | %.0f%%' % (total_cycles[c[0]], 100 * total_flops / c[3] / total_cycles[c[0]]) for c in CORES)))
print()
print('cycles: the product\'s tiles x K x their loop\'s cycles a k (llvm-mca\'s sapphirerapids for Intel; the')
print('estimates above for Zen 3, 4 and 5), for one group; share: the useful flops (2 rows K O)')
print('over those cycles at the FMA peak (32 flop a cycle with 8-lane FMAs and on Zen 4, 64 with 16-lane')
print('FMAs on Intel and Zen 5). The loads and stores around each tile and the calls are not counted.')
print()

# ---- The step's products across the lanes (its products since the blocks went there) ---------
lanes_classes = {}
for loop in loops:
    if loop['lanes'] and loop['cls']: lanes_classes.setdefault(loop['cls'], []).append(loop)
unclassified = [l['name'] for l in loops if l['lanes'] and not l['cls'] and any(x.startswith('vfmadd') for x in l['body'])]
hdr = ['tile (variant, lanes, R x NO, B)', 'copies', 'insns', 'FMAs', 'loads a k (vectors/broadcasts)', 'znver3',
       'icelake-server', 'sapphirerapids', 'Zen 3 est.', 'Zen 4 est.', 'Zen 5 est.']
print('The step\'s products across the lanes (lanes_linear_x86_64_v3 / _v4: B a weight, broadcast; lanes_product_')
print('x86_64_v3 / _v4: B in lanes), by tile; cycles per k iteration:')
table_head(hdr)
for cls in sorted(lanes_classes):
    ls = lanes_classes[cls]
    v, W, R, NO, kind = cls
    rs = [results[l['name']] for l in ls]
    zen = lambda core: zen_cell(rs, core)
    vec, bro, _ = loads_of(ls[0]['body'])
    print('| %s w%d %dx%d %s | %d | %s | %d | %d/%d | %s | %s | %s | %s |' % (
        v, W, R, NO, 'weight' if kind == 'linear' else 'lanes', len(ls),
        span([len(l['body']) for l in ls]).replace('.00', ''), R * NO, vec, bro,
        ' | '.join(span([r[c] for r in rs]) for c in CPUS), zen('zen3'), zen('zen4'), zen('zen5')))
if unclassified: print('(k-loops not classified: %s)' % ', '.join(unclassified))
print()

# The reference study's products for a group of 16 examples across the lanes (T = 10, D = 20,
# F = 32, V = 11, one head, two blocks), as the step calls them (model/fused_cpu.cpp,
# cpu_attention_lanes.h): (layer, product, rows, K, O, kind, times a group). A weight's
# gradient: rows its inputs, K = T (each lane its example's sum), accumulated.
lanes_group = [('QKV projection', 'forward', T, D, 3 * D, 'linear', L),
               ('attention scores', 'forward k q^T', T, D, T, 'product', L),
               ('attention-weighted values', 'forward w v', T, T, D, 'product', L),
               ('output projection', 'forward', T, D, D, 'linear', L),
               ('feed-forward up (fc1)', 'forward', T, D, F, 'linear', L),
               ('feed-forward down (fc2)', 'forward', T, F, D, 'linear', L),
               ('head', 'forward', T, D, V, 'linear', 1),
               ('head', 'grad W', D, T, V, 'product', 1),
               ('head', 'grad in', T, V, D, 'linear', 1),
               ('feed-forward down (fc2)', 'grad W', F, T, D, 'product', L),
               ('feed-forward down (fc2)', 'grad in', T, D, F, 'linear', L),
               ('feed-forward up (fc1)', 'grad W', D, T, F, 'product', L),
               ('feed-forward up (fc1)', 'grad in', T, F, D, 'linear', L),
               ('output projection', 'grad W', D, T, D, 'product', L),
               ('output projection', 'grad in', T, D, D, 'linear', L),
               ('attention-weighted values', 'd weights = v g^T', T, D, T, 'product', L),
               ('attention-weighted values', 'd v = w^T g', T, T, D, 'product', L),
               ('attention scores', 'd q = ds k', T, T, D, 'product', L),
               ('attention scores', 'd k = ds^T q', T, T, D, 'product', L),
               ('QKV projection', 'grad W', D, T, 3 * D, 'product', L),
               ('QKV projection', 'grad in', T, 3 * D, D, 'linear', L)]
LANES_CORES = [('Zen 3 (v3)', 'v3', 32, 'zen3'), ('Intel (v4)', 'v4', 64, 'sapphirerapids'),
               ('Intel (v3)', 'v3', 32, 'sapphirerapids'), ('Zen 4 (v4)', 'v4', 32, 'zen4'),
               ('Zen 5 (v4)', 'v4', 64, 'zen5')]

def lanes_tiles(variant, rows, O):
    """lanes_tiles' tiles of a product: ((R, NO), count), rows in R's then single rows, columns in
    NO's then one tile of the rest, for each vector of lanes."""
    W, R, NO = LANES_SHAPE[variant]
    chunks = 16 // W
    out = []
    for r, nr in ((R, rows // R), (1, rows % R)):
        if not nr: continue
        if O // NO: out.append(((r, NO), nr * (O // NO) * chunks))
        if O % NO: out.append(((r, O % NO), nr * chunks))
    return out

def lanes_class_cycles(variant, W, R, NO, kind, source):
    xs = [results[l['name']][source] for l in lanes_classes.get((variant, W, R, NO, kind), [])]
    xs = [x[0] if isinstance(x, tuple) else x for x in xs if x is not None]
    if not xs: raise SystemExit('no k-loop of the lanes tile %s in the build\'s functions' % ((variant, W, R, NO, kind),))
    return sum(xs) / len(xs)

print('The reference study\'s products for one group of 16 examples across the lanes (k-loops only):')
print('| layer | product | rows x K x O (times a group) | B | ' + ' | '.join('%s cycles | share' % c[0] for c in LANES_CORES) + ' |')
print('|' + '---|' * (4 + 2 * len(LANES_CORES)))
total_flops, total_cycles = 0, {c[0]: 0.0 for c in LANES_CORES}
for layer, what, n, K, O, kind, times in lanes_group:
    flops = 2 * n * K * O * times * 16
    total_flops += flops
    cells = []
    for cname, variant, peak, source in LANES_CORES:
        W = LANES_SHAPE[variant][0]
        cycles = sum(count * K * times * lanes_class_cycles(variant, W, R, NO, kind, source)
                     for (R, NO), count in lanes_tiles(variant, n, O))
        total_cycles[cname] += cycles
        cells += ['%.0f' % cycles, '%.0f%%' % (100 * flops / peak / cycles)]
    print('| %s | %s | %d x %d x %d (x%d) | %s | %s |' % (layer, what, n, K, O, times,
                                                        'weight' if kind == 'linear' else 'lanes', ' | '.join(cells)))
print('| all products | | %d flop | | %s |' % (total_flops, ' | '.join(
    '%.0f | %.0f%%' % (total_cycles[c[0]], 100 * total_flops / c[2] / total_cycles[c[0]]) for c in LANES_CORES)))
print()
print('The tiles: 5 x 4 on x86-64-v4 (16 lanes), 2 x 5 on x86-64-v3 (8 lanes, each tile twice), single rows and')
print('a narrower last tile for the rest. cycles: tiles x K x their loop\'s cycles a k; share: the useful flops over')
print('those cycles at the core\'s FMA peak (32 flop a cycle on Zen 3, Zen 4 and Intel\'s 8-lane FMAs, 64 on Intel')
print('and Zen 5 with 16 lanes). The tiles\' first loads, their stores (and epilogues) and the calls are not counted:')
print('the driver times them with the loops (its line "the step\'s products of a group of 16 examples").')
PY

# 6. The model against this core.
if [ "$TIME" = 1 ]; then
  echo
  echo "Measured here ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), one thread):"
  "$OUT/driver" --k 256
  for f in tile_v3_w8_r4_nv1 tile_v3_w8_r4_nv2 tile_v3_w8_r4_nv3 tile_v3_w8_r5_nv1 tile_v3_w8_r5_nv2 tile_v3_w8_r5_nv3; do
    shortest=$(for s in "$OUT"/loops/$f.*.s; do echo "$(wc -l < "$s") $s"; done | sort -n | head -1 | cut -d' ' -f2)
    echo "llvm-mca znver3 $f $(grep -m1 'Total Cycles' "$OUT/mca/$(basename "$shortest" .s).znver3.txt" | awk '{printf "%.2f", $3 / 100}') cycles per k"
  done
fi
