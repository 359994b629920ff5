//! Causal attention computed one query row at a time.
//!
//! Each output row depends only on its own query and the keys/values at positions up to its
//! own, reduced in a fixed order. That makes results independent of how a prompt is cut into
//! prefill chunks, of what else shares the batch, and of preemption and prefix-cache hits: the
//! engine's greedy outputs are then identical however requests are scheduled. A GEMM-based
//! attention cannot promise this, because its reduction order depends on the matrix shapes.

use rayon::prelude::*;

use crate::kv_element::KvElement;

/// Shapes of one chunk's attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionDims {
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    /// Query rows (new tokens) of the chunk.
    pub len: usize,
    /// Keys/values available (`>= start + len`).
    pub context: usize,
    /// Position of the first query row.
    pub start: usize,
}

const LANES: usize = 8;

/// How a product is added to an accumulator: fused (one rounding, the AVX2 compilation, where
/// FMA is present) or as a multiply then an add (the portable compilation: without the `fma`
/// target feature `mul_add` is a libm call per element, measured 4x slower prefill). A process
/// runs one compilation for every attention path, so their results stay identical.
pub(crate) trait MulAdd: Copy {
    fn madd(a: f32, b: f32, acc: f32) -> f32;

    /// [`dot`] of `a` with eight vectors at once ([`dot8_portable`] unless a compilation has
    /// a faster way to the same bits).
    #[inline(always)]
    fn dot8(a: &[f32], bs: &[&[f32]; LANES]) -> [f32; LANES] {
        dot8_portable::<Self>(a, bs)
    }

    /// `dst[i] = src[i].to_f32()` ([`KvElement::widen`] unless a compilation has a faster way;
    /// widening is exact, so every way gives the same values).
    #[inline(always)]
    fn widen<E: KvElement>(dst: &mut [f32], src: &[E]) {
        E::widen(dst, src)
    }

    /// [`weighted_sums_portable`] unless a compilation has a faster way to the same bits.
    #[inline(always)]
    fn weighted_sums<E: KvElement>(
        ws: &[f32],
        stride: usize,
        visible: &[usize],
        vs: &[&[E]],
        out: &mut [f32],
    ) {
        weighted_sums_portable::<Self, E>(ws, stride, visible, vs, out)
    }
}

/// Queries whose weighted sums of values are computed together: each holds two vectors of
/// accumulators, so six leave room in the sixteen AVX2 registers for the two value vectors and
/// the broadcast weight.
const WEIGHTED_QUERIES: usize = 6;

#[derive(Clone, Copy, Debug)]
pub(crate) struct Unfused;

impl MulAdd for Unfused {
    #[inline(always)]
    fn madd(a: f32, b: f32, acc: f32) -> f32 {
        a * b + acc
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Fused;

impl MulAdd for Fused {
    #[inline(always)]
    fn madd(a: f32, b: f32, acc: f32) -> f32 {
        a.mul_add(b, acc)
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn dot8(a: &[f32], bs: &[&[f32]; LANES]) -> [f32; LANES] {
        // SAFETY: `Fused` runs only inside the AVX2 + FMA + F16C compilations
        // (`RowKernel::Avx2`, which `detect` chose because the CPU has all three).
        unsafe { dot8_avx2(a, bs) }
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn widen<E: KvElement>(dst: &mut [f32], src: &[E]) {
        // SAFETY: as in `dot8`.
        unsafe { widen_avx2(dst, src) }
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn weighted_sums<E: KvElement>(
        ws: &[f32],
        stride: usize,
        visible: &[usize],
        vs: &[&[E]],
        out: &mut [f32],
    ) {
        // SAFETY: as in `dot8`.
        unsafe { weighted_sums_avx2(ws, stride, visible, vs, out) }
    }
}

/// For each query `i` (up to [`WEIGHTED_QUERIES`]), whose weights are `ws[i * stride..]`
/// and output `out[i * d..(i + 1) * d]` (`d = out.len() / visible.len()`):
/// `out[c] = madd(w[j], vs[j][c], out[c])` for `j` in `0..visible[i]`, in that order, as
/// [`attend_row`] adds the values.
#[inline(always)]
fn weighted_sums_portable<M: MulAdd, E: KvElement>(
    ws: &[f32],
    stride: usize,
    visible: &[usize],
    vs: &[&[E]],
    out: &mut [f32],
) {
    let d = out.len() / visible.len().max(1);
    for ((i, &seen), o) in visible.iter().enumerate().zip(out.chunks_exact_mut(d)) {
        for (&w, v) in ws[i * stride..i * stride + seen].iter().zip(vs) {
            for (o, &x) in o.iter_mut().zip(&v[..d]) {
                *o = M::madd(w, x.to_f32(), *o);
            }
        }
    }
}

/// [`KvElement::widen`] eight lanes at a time in registers (a call into the `half` crate per
/// key cost a decode step more than widening in the dot products).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn widen_avx2<E: KvElement>(dst: &mut [f32], src: &[E]) {
    use std::arch::x86_64::_mm256_storeu_ps;
    assert_eq!(dst.len(), src.len(), "widening lengths");
    let chunks = src.len() / LANES * LANES;
    for c in (0..chunks).step_by(LANES) {
        // SAFETY: `c + 8 <= chunks <= len` of both.
        unsafe { _mm256_storeu_ps(dst.as_mut_ptr().add(c), E::load8(src.as_ptr().add(c))) };
    }
    for (d, x) in dst[chunks..].iter_mut().zip(&src[chunks..]) {
        *d = x.to_f32();
    }
}

/// Columns one pass of [`weighted_sums_avx2`] keeps in registers for every query: two vectors.
#[cfg(target_arch = "x86_64")]
const WEIGHTED_COLUMNS: usize = 2 * LANES;

/// [`weighted_sums_portable`] under [`Fused`], sixteen columns at a time for all the queries
/// together, a block of positions at a time: each value is loaded once for all of them (one
/// query at a time, the values were read once per query, and the passes waited on the cache;
/// a prefill chunk's attention took 1.2 to 1.4 times as long), and each output element gets the
/// same multiply-adds in the same order.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn weighted_sums_avx2<E: KvElement>(
    ws: &[f32],
    stride: usize,
    visible: &[usize],
    vs: &[&[E]],
    out: &mut [f32],
) {
    let q = visible.len();
    assert!((1..=WEIGHTED_QUERIES).contains(&q), "{q} queries");
    let d = out.len() / q;
    let seen = visible.iter().copied().max().unwrap_or(0);
    assert!(
        out.len() == q * d
            && visible
                .iter()
                .enumerate()
                .all(|(i, &v)| v <= stride && i * stride + v <= ws.len())
            && vs.len() >= seen
            && vs[..seen].iter().all(|v| v.len() >= d),
        "weights, values or outputs too short"
    );
    let groups = d / WEIGHTED_COLUMNS * WEIGHTED_COLUMNS;
    let passes = groups / WEIGHTED_COLUMNS;
    let common = visible.iter().copied().min().unwrap_or(0);
    // The positions every query sees, a block at a time for all the queries and columns;
    // while a block's passes run, the next block's value rows are prefetched whole, a share
    // with each pass (in a pass of sixteen columns alone, a row's line was read 1 KiB after
    // the last row's, which left each load waiting on memory in a decode step).
    for b0 in (0..common).step_by(WEIGHTED_BLOCK) {
        let b1 = (b0 + WEIGHTED_BLOCK).min(common);
        let share = WEIGHTED_BLOCK.div_ceil(passes.max(1));
        for (pass, c) in (0..groups).step_by(WEIGHTED_COLUMNS).enumerate() {
            let next = b1 + pass * share;
            for v in vs.iter().take(seen).skip(next).take(share) {
                prefetch_row(&v[..d]);
            }
            // SAFETY: checked above: every query's weights and output and every value row `j <
            // seen` are long enough for columns `c..c + 16 <= d`.
            unsafe {
                match q {
                    1 => weighted_columns::<1, E>(ws, stride, vs, out, c, b0..b1),
                    2 => weighted_columns::<2, E>(ws, stride, vs, out, c, b0..b1),
                    3 => weighted_columns::<3, E>(ws, stride, vs, out, c, b0..b1),
                    4 => weighted_columns::<4, E>(ws, stride, vs, out, c, b0..b1),
                    5 => weighted_columns::<5, E>(ws, stride, vs, out, c, b0..b1),
                    _ => weighted_columns::<6, E>(ws, stride, vs, out, c, b0..b1),
                }
            }
        }
    }
    // Each query's further positions (rows of a prefill chunk see different numbers).
    for (i, &seen) in visible.iter().enumerate() {
        for c in (0..groups).step_by(WEIGHTED_COLUMNS) {
            // SAFETY: as above, for query `i` alone (its weights and its output row).
            unsafe {
                weighted_columns::<1, E>(
                    &ws[i * stride..],
                    stride,
                    vs,
                    &mut out[i * d..(i + 1) * d],
                    c,
                    common..seen,
                )
            };
        }
    }
    for ((i, &seen), o) in visible.iter().enumerate().zip(out.chunks_exact_mut(d)) {
        for (&w, v) in ws[i * stride..i * stride + seen].iter().zip(vs) {
            for (o, &x) in o[groups..].iter_mut().zip(&v[groups..d]) {
                *o = w.mul_add(x.to_f32(), *o);
            }
        }
    }
}

/// Positions `from` (in order) of columns `c..c + 16` of `Q` queries' weighted sums (see
/// [`weighted_sums_avx2`]), each value loaded once for all of them.
///
/// # Safety
/// AVX2, FMA and F16C; `out` holds `Q` rows of `d >= c + 16` floats, each query `i`'s weights
/// `ws[i * stride + j]` exist for `j` in `from`, and so do the value rows, each of `c + 16`
/// elements or more.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn weighted_columns<const Q: usize, E: KvElement>(
    ws: &[f32],
    stride: usize,
    vs: &[&[E]],
    out: &mut [f32],
    c: usize,
    from: std::ops::Range<usize>,
) {
    use std::arch::x86_64::*;
    if from.is_empty() {
        return;
    }
    let d = out.len() / Q;
    let (w, o) = (ws.as_ptr(), out.as_mut_ptr());
    // SAFETY (whole body): the caller's bounds.
    unsafe {
        let mut acc: [[__m256; 2]; Q] = std::array::from_fn(|i| {
            let at = o.add(i * d + c);
            [_mm256_loadu_ps(at), _mm256_loadu_ps(at.add(LANES))]
        });
        for j in from {
            let v = vs[j].as_ptr().add(c);
            let (v0, v1) = (E::load8(v), E::load8(v.add(LANES)));
            for (i, acc) in acc.iter_mut().enumerate() {
                let wj = _mm256_broadcast_ss(&*w.add(i * stride + j));
                acc[0] = _mm256_fmadd_ps(wj, v0, acc[0]);
                acc[1] = _mm256_fmadd_ps(wj, v1, acc[1]);
            }
        }
        for (i, acc) in acc.iter().enumerate() {
            let at = o.add(i * d + c);
            _mm256_storeu_ps(at, acc[0]);
            _mm256_storeu_ps(at.add(LANES), acc[1]);
        }
    }
}

/// Value rows per block of [`weighted_sums_avx2`]: a block of the paged cache.
#[cfg(target_arch = "x86_64")]
const WEIGHTED_BLOCK: usize = 16;

/// Prefetch hints for the cache lines of `x`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_row<E>(x: &[E]) {
    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
    for line in (0..x.len()).step_by(64 / std::mem::size_of::<E>()) {
        // SAFETY: a prefetch never faults, and `line` is inside `x`.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(x.as_ptr().add(line).cast()) };
    }
}

/// candle-style fixed reduction of eight lanes.
#[inline(always)]
fn reduce8(acc: &[f32; LANES]) -> f32 {
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
}

/// Dot product with eight independent accumulators (vectorizes; fixed order).
#[inline(always)]
fn dot<M: MulAdd, E: KvElement>(a: &[f32], b: &[E]) -> f32 {
    let mut acc = [0f32; LANES];
    let chunks = a.len() / LANES * LANES;
    for (ca, cb) in a[..chunks]
        .chunks_exact(LANES)
        .zip(b[..chunks].chunks_exact(LANES))
    {
        for l in 0..LANES {
            acc[l] = M::madd(ca[l], cb[l].to_f32(), acc[l]);
        }
    }
    let mut tail = 0f32;
    for (x, y) in a[chunks..].iter().zip(&b[chunks..]) {
        tail = M::madd(*x, y.to_f32(), tail);
    }
    reduce8(&acc) + tail
}

/// Eight consecutive values as an array (so that loops over them vectorize).
#[inline(always)]
fn lanes(x: &[f32], at: usize) -> &[f32; LANES] {
    x[at..at + LANES]
        .try_into()
        .expect("a slice of LANES values")
}

/// `acc[l] = madd(a[l], b[l], acc[l])` for the eight lanes.
#[inline(always)]
fn madd8<M: MulAdd>(a: &[f32; LANES], b: &[f32; LANES], acc: &mut [f32; LANES]) {
    for l in 0..LANES {
        acc[l] = M::madd(a[l], b[l], acc[l]);
    }
}

/// [`dot`] of `a` with eight vectors at once (each result equal to `dot`'s, bit for bit): the
/// query is read once per chunk for eight keys.
#[inline(always)]
fn dot8_portable<M: MulAdd>(a: &[f32], bs: &[&[f32]; LANES]) -> [f32; LANES] {
    let mut acc = [[0f32; LANES]; LANES];
    let chunks = a.len() / LANES * LANES;
    for c in (0..chunks).step_by(LANES) {
        let ca = lanes(a, c);
        for (acc, b) in acc.iter_mut().zip(bs) {
            madd8::<M>(ca, lanes(b, c), acc);
        }
    }
    std::array::from_fn(|i| {
        let mut tail = 0f32;
        for (x, y) in a[chunks..].iter().zip(&bs[i][chunks..]) {
            tail = M::madd(*x, *y, tail);
        }
        reduce8(&acc[i]) + tail
    })
}

/// [`dot8_portable`] with fused multiply-adds in AVX2 registers: one register of eight lanes
/// per key, and the eight keys' [`reduce8`]s done together by a transpose of adds (the
/// portable loop reduced each key on its own, in more instructions than its multiply-adds).
/// Every lane sees the same operations in the same order, so the results are the portable
/// ones' bits under [`Fused`].
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot8_avx2(a: &[f32], bs: &[&[f32]; LANES]) -> [f32; LANES] {
    use std::arch::x86_64::*;
    let chunks = a.len() / LANES * LANES;
    let mut acc = [_mm256_setzero_ps(); LANES];
    for c in (0..chunks).step_by(LANES) {
        // SAFETY: `c + 8 <= chunks <= a.len()`, and every key is as long as `a`.
        let qa = unsafe { _mm256_loadu_ps(a.as_ptr().add(c)) };
        for (acc, b) in acc.iter_mut().zip(bs) {
            // SAFETY: as above.
            let kb = unsafe { _mm256_loadu_ps(b.as_ptr().add(c)) };
            *acc = _mm256_fmadd_ps(qa, kb, *acc);
        }
    }
    // Key i's lanes l and l + 4 added, keys i and i + 4 side by side: lanes 0..4 are key i's
    // (l0 + l4, l1 + l5, l2 + l6, l3 + l7), lanes 4..8 key i + 4's.
    let halves: [__m256; 4] = std::array::from_fn(|i| {
        _mm256_add_ps(
            _mm256_permute2f128_ps::<0x20>(acc[i], acc[i + 4]),
            _mm256_permute2f128_ps::<0x31>(acc[i], acc[i + 4]),
        )
    });
    // Pairwise adds: [(l0+l4)+(l1+l5), (l2+l6)+(l3+l7)] per key, keys 0, 1, 4, 5 and 2, 3, 6, 7;
    // then those two added: reduce8 of keys 0..8, in order.
    let p = _mm256_hadd_ps(halves[0], halves[1]);
    let q = _mm256_hadd_ps(halves[2], halves[3]);
    let mut sums = [0f32; LANES];
    // SAFETY: `sums` holds eight floats.
    unsafe { _mm256_storeu_ps(sums.as_mut_ptr(), _mm256_hadd_ps(p, q)) };
    std::array::from_fn(|i| {
        let mut tail = 0f32;
        for (x, y) in a[chunks..].iter().zip(&bs[i][chunks..]) {
            tail = x.mul_add(*y, tail);
        }
        sums[i] + tail
    })
}

/// `q`: `[num_heads, len, head_dim]`, `k`/`v`: `[num_kv_heads, context, head_dim]` (row-major,
/// contiguous). Returns `[len, num_heads * head_dim]`. Query row `i` attends to keys
/// `0..=start + i`; query head `h` reads kv head `h / (num_heads / num_kv_heads)`.
pub fn causal_attention_rows(q: &[f32], k: &[f32], v: &[f32], dims: AttentionDims) -> Vec<f32> {
    let AttentionDims {
        num_heads,
        num_kv_heads,
        head_dim: d,
        len,
        context,
        start,
    } = dims;
    assert_eq!(q.len(), num_heads * len * d, "q shape");
    assert_eq!(k.len(), num_kv_heads * context * d, "k shape");
    assert_eq!(v.len(), k.len(), "v shape");
    assert!(start + len <= context, "queries reach past the context");
    let group = num_heads / num_kv_heads;
    let scale = 1.0 / (d as f32).sqrt();
    let simd = RowKernel::detect();
    let tiles: Vec<Tile> = (0..num_kv_heads)
        .flat_map(|kv| Tile::split(kv, 0, len, start + len, group))
        .collect();
    let mut out = vec![0f32; len * num_heads * d];
    let results: Vec<Vec<f32>> = tiles
        .par_iter()
        .map_init(Vec::new, |scores, tile| {
            let keys = &k[tile.kv_head * context * d..];
            let values = &v[tile.kv_head * context * d..];
            let queries: Vec<TileQuery<'_>> = tile
                .queries(group)
                .map(|(i, h)| TileQuery {
                    q: &q[(h * len + i) * d..(h * len + i + 1) * d],
                    visible: start + i + 1,
                })
                .collect();
            let mut dst = vec![0f32; queries.len() * d];
            simd.attend_tile(
                &queries,
                scale,
                |j| &keys[j * d..(j + 1) * d],
                |j| &values[j * d..(j + 1) * d],
                scores,
                &mut dst,
            );
            dst
        })
        .collect();
    for (tile, dst) in tiles.iter().zip(&results) {
        tile.scatter(dst, group, num_heads, d, 0, &mut out);
    }
    out
}

/// A unit of attention work: rows `rows` (indices into the chunk) of the query heads that share
/// kv head `kv_head`. Its rows' queries are computed together so that each key and value is
/// read once for all of them.
#[derive(Debug, Clone)]
pub(crate) struct Tile {
    pub kv_head: usize,
    pub rows: std::ops::Range<usize>,
    /// Which chunk of a packed batch (0 for a single chunk).
    pub chunk: usize,
}

/// Scores kept per tile: about 256 KiB, so a tile's scores stay in the L2 cache.
const TILE_SCORES: usize = 64 * 1024;

impl Tile {
    /// Rows `0..len` of kv head `kv_head` in tiles whose scores (queries × `max_visible`) fit
    /// [`TILE_SCORES`]; `queries_per_row` is the group size (query heads per kv head).
    pub fn split(
        kv_head: usize,
        chunk: usize,
        len: usize,
        max_visible: usize,
        queries_per_row: usize,
    ) -> impl Iterator<Item = Tile> {
        let rows = (TILE_SCORES / (queries_per_row.max(1) * max_visible.max(1))).max(1);
        (0..len.div_ceil(rows)).map(move |t| Tile {
            kv_head,
            rows: t * rows..((t + 1) * rows).min(len),
            chunk,
        })
    }

    /// `(row, head)` of each query of the tile, row by row, heads in order.
    pub fn queries(&self, group: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.rows
            .clone()
            .flat_map(move |i| (0..group).map(move |g| (i, self.kv_head * group + g)))
    }

    /// Copies a tile's outputs (`[rows][group][d]`) into `out` (`[tokens][num_heads][d]`), rows
    /// counted from `row0`.
    pub fn scatter(
        &self,
        dst: &[f32],
        group: usize,
        num_heads: usize,
        d: usize,
        row0: usize,
        out: &mut [f32],
    ) {
        let width = group * d;
        for (r, src) in self.rows.clone().zip(dst.chunks_exact(width)) {
            let o = ((row0 + r) * num_heads + self.kv_head * group) * d;
            out[o..o + width].copy_from_slice(src);
        }
    }
}

/// One query of a tile: its vector and how many positions it sees.
#[derive(Clone, Copy)]
pub(crate) struct TileQuery<'a> {
    pub q: &'a [f32],
    pub visible: usize,
}

/// One query row of one head: its vector, how many positions it sees, the score scale (the
/// one-row reference's input).
#[cfg(test)]
#[derive(Clone, Copy)]
pub(crate) struct Row<'a> {
    pub q: &'a [f32],
    pub visible: usize,
    pub scale: f32,
}

/// Which compilation of the attention arithmetic ([`attend_tile`]) runs: the portable one
/// (multiply, then add) or the AVX2 one (fused multiply-add, wider vectors). Both sum in the
/// same fixed order; they differ in rounding, so a process uses one of them for everything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowKernel {
    Baseline,
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl RowKernel {
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
        {
            return Self::Avx2;
        }
        Self::Baseline
    }

    /// Writes the attention output of `row` into `dst` (zeroed, `head_dim` floats); `key(j)` and
    /// `value(j)` are position `j`'s vectors. `scores` is scratch space. The reference the
    /// tiled kernel is tested against.
    #[cfg(test)]
    #[inline]
    pub fn attend<'a, E: KvElement>(
        self,
        row: Row<'_>,
        key: impl Fn(usize) -> &'a [E],
        value: impl Fn(usize) -> &'a [E],
        scores: &mut Vec<f32>,
        dst: &mut [f32],
    ) {
        match self {
            Self::Baseline => attend_row::<Unfused, E, _, _>(row, key, value, scores, dst),
            // SAFETY: `detect` found AVX2 on this CPU.
            #[cfg(target_arch = "x86_64")]
            Self::Avx2 => unsafe { attend_row_avx2(row, key, value, scores, dst) },
        }
    }

    /// [`attend_tile`] in this compilation; `dst` is zeroed, `queries.len() * head_dim` floats.
    #[inline]
    pub fn attend_tile<'a, E: KvElement>(
        self,
        queries: &[TileQuery<'_>],
        scale: f32,
        key: impl Fn(usize) -> &'a [E],
        value: impl Fn(usize) -> &'a [E],
        scores: &mut Vec<f32>,
        dst: &mut [f32],
    ) {
        match self {
            Self::Baseline => {
                attend_tile::<Unfused, E, _, _>(queries, scale, key, value, scores, dst)
            }
            // SAFETY: `detect` found AVX2 on this CPU.
            #[cfg(target_arch = "x86_64")]
            Self::Avx2 => unsafe { attend_tile_avx2(queries, scale, key, value, scores, dst) },
        }
    }
}

/// [`attend_tile`] compiled for AVX2, FMA and F16C.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn attend_tile_avx2<'a, E: KvElement>(
    queries: &[TileQuery<'_>],
    scale: f32,
    key: impl Fn(usize) -> &'a [E],
    value: impl Fn(usize) -> &'a [E],
    scores: &mut Vec<f32>,
    dst: &mut [f32],
) {
    attend_tile::<Fused, E, _, _>(queries, scale, key, value, scores, dst)
}

/// Softmax sums computed side by side.
const SUMS_TOGETHER: usize = 4;

/// [`attend_row`] for several queries that share keys and values (query heads of one kv head,
/// rows of one chunk): every key and value is read once for all of them, and each query's
/// output is computed with exactly [`attend_row`]'s operations in its order, so the two agree
/// bit for bit.
#[inline(always)]
fn attend_tile<'a, M: MulAdd, E: KvElement, K, V>(
    queries: &[TileQuery<'_>],
    scale: f32,
    key: K,
    value: V,
    scores: &mut Vec<f32>,
    dst: &mut [f32],
) where
    K: Fn(usize) -> &'a [E],
    V: Fn(usize) -> &'a [E],
{
    let stride = queries.iter().map(|t| t.visible).max().unwrap_or(0);
    if stride == 0 {
        return;
    }
    let d = dst.len() / queries.len();
    scores.clear();
    scores.resize(queries.len() * stride, 0.0);
    // Keys that are not f32 are widened eight at a time into `widened`, once for all the
    // queries (widening in the dot products repeated the conversion for each query, and a
    // prefill chunk's scores took longer from f16 blocks than from f32 ones).
    let mut widened = Vec::new();
    // Scores, eight keys at a time.
    for j0 in (0..stride).step_by(LANES) {
        let stored: [&[E]; LANES] = std::array::from_fn(|i| key((j0 + i).min(stride - 1)));
        let keys: [&[f32]; LANES] = match stored.map(E::as_f32) {
            [
                Some(k0),
                Some(k1),
                Some(k2),
                Some(k3),
                Some(k4),
                Some(k5),
                Some(k6),
                Some(k7),
            ] => [k0, k1, k2, k3, k4, k5, k6, k7],
            _ => {
                widened.resize(LANES * d, 0.0);
                for (w, k) in widened.chunks_exact_mut(d).zip(stored) {
                    M::widen(w, &k[..d]);
                }
                std::array::from_fn(|i| &widened[i * d..(i + 1) * d])
            }
        };
        for (t, s) in queries.iter().zip(scores.chunks_exact_mut(stride)) {
            if t.visible >= j0 + LANES {
                let r = M::dot8(t.q, &keys);
                for (s, r) in s[j0..j0 + LANES].iter_mut().zip(r) {
                    *s = r * scale;
                }
            } else {
                for j in j0..t.visible {
                    s[j] = dot::<M, f32>(t.q, keys[j - j0]) * scale;
                }
            }
        }
    }
    // Softmax per query, in attend_row's order; each score becomes its weight `p * inv`.
    for (t, s) in queries.iter().zip(scores.chunks_exact_mut(stride)) {
        let s = &mut s[..t.visible];
        let max = max_of(s);
        for x in s.iter_mut() {
            *x = (*x - max).exp();
        }
    }
    // Each query's sum runs position by position, as in attend_row; four queries go side by
    // side so that their additions overlap (one sum alone waits on each add's latency).
    for (group, rows) in queries
        .chunks(SUMS_TOGETHER)
        .zip(scores.chunks_mut(SUMS_TOGETHER * stride))
    {
        let mut sums = [0f32; SUMS_TOGETHER];
        let common = group.iter().map(|t| t.visible).min().unwrap_or(0);
        for j in 0..common {
            for (g, sum) in sums.iter_mut().enumerate().take(group.len()) {
                *sum += rows[g * stride + j];
            }
        }
        for ((t, sum), s) in group
            .iter()
            .zip(&mut sums)
            .zip(rows.chunks_exact_mut(stride))
        {
            for &x in &s[common..t.visible] {
                *sum += x;
            }
            let inv = 1.0 / *sum;
            for x in &mut s[..t.visible] {
                *x *= inv;
            }
        }
    }
    // The weighted sum of values, position by position for each output element, a few
    // queries at a time, each value read once for all of them.
    let values: Vec<&[E]> = (0..stride).map(&value).collect();
    for ((group, ws), out) in queries
        .chunks(WEIGHTED_QUERIES)
        .zip(scores.chunks(WEIGHTED_QUERIES * stride))
        .zip(dst.chunks_mut(WEIGHTED_QUERIES * d))
    {
        let mut visible = [0; WEIGHTED_QUERIES];
        for (v, t) in visible.iter_mut().zip(group) {
            *v = t.visible;
        }
        M::weighted_sums(ws, stride, &visible[..group.len()], &values, out);
    }
}

/// The largest score, as [`attend_row`]'s fold of `f32::max` from negative infinity finds it,
/// kept in eight lanes: the single fold waited on every comparison (a third of the tile
/// kernel's own time in a 16-way decode), and the lanes vectorize. Both skip NaN, and the
/// maximum of the other values does not depend on their order; only the sign of a zero
/// maximum may differ, which no `x - max` that follows can tell apart (a nonzero `x` minus
/// either zero is `x`, and a zero minus either zero is a zero, whose `exp` is 1).
#[inline(always)]
fn max_of(s: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let chunks = s.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a = a.max(x);
        }
    }
    acc.iter()
        .chain(tail)
        .fold(f32::NEG_INFINITY, |m, &x| m.max(x))
}

/// [`attend_row`] compiled for AVX2, FMA and F16C.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[cfg(all(test, target_arch = "x86_64"))]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn attend_row_avx2<'a, E: KvElement>(
    row: Row<'_>,
    key: impl Fn(usize) -> &'a [E],
    value: impl Fn(usize) -> &'a [E],
    scores: &mut Vec<f32>,
    dst: &mut [f32],
) {
    attend_row::<Fused, E, _, _>(row, key, value, scores, dst)
}

/// Scores, softmax and the weighted sum of values for one query row, in a fixed order: the
/// reference for [`attend_tile`], which every attention path (contiguous, paged) runs.
#[cfg(test)]
#[inline(always)]
fn attend_row<'a, M: MulAdd, E: KvElement, K, V>(
    row: Row<'_>,
    key: K,
    value: V,
    scores: &mut Vec<f32>,
    dst: &mut [f32],
) where
    K: Fn(usize) -> &'a [E],
    V: Fn(usize) -> &'a [E],
{
    scores.clear();
    let mut max = f32::NEG_INFINITY;
    for j in 0..row.visible {
        let s = dot::<M, E>(row.q, key(j)) * row.scale;
        max = max.max(s);
        scores.push(s);
    }
    let mut sum = 0f32;
    for s in scores.iter_mut() {
        *s = (*s - max).exp();
        sum += *s;
    }
    let inv = 1.0 / sum;
    for (j, p) in scores.iter().enumerate() {
        let w = p * inv;
        for (o, x) in dst.iter_mut().zip(value(j)) {
            *o = M::madd(w, x.to_f32(), *o);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Reproducible values in [-1, 1) (xorshift), shared by the kernels' tests.
    pub(crate) fn data(n: usize, seed: u32) -> Vec<f32> {
        let mut x = seed.wrapping_mul(2654435761).wrapping_add(1);
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x % 2000) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    /// Naive f64 attention as an independent check.
    fn naive(q: &[f32], k: &[f32], v: &[f32], dm: AttentionDims) -> Vec<f32> {
        let d = dm.head_dim;
        let mut out = vec![0f32; dm.len * dm.num_heads * d];
        for h in 0..dm.num_heads {
            let kv = h / (dm.num_heads / dm.num_kv_heads);
            for i in 0..dm.len {
                let qr = &q[(h * dm.len + i) * d..][..d];
                let vis = dm.start + i + 1;
                let s: Vec<f64> = (0..vis)
                    .map(|j| {
                        let kr = &k[(kv * dm.context + j) * d..][..d];
                        qr.iter()
                            .zip(kr)
                            .map(|(a, b)| *a as f64 * *b as f64)
                            .sum::<f64>()
                            / (d as f64).sqrt()
                    })
                    .collect();
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
                let z: f64 = e.iter().sum();
                for c in 0..d {
                    let val: f64 = (0..vis)
                        .map(|j| e[j] / z * v[(kv * dm.context + j) * d + c] as f64)
                        .sum();
                    out[(i * dm.num_heads + h) * d + c] = val as f32;
                }
            }
        }
        out
    }

    #[test]
    fn the_lane_maximum_is_the_folds() {
        let fold = |s: &[f32]| s.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
        let ramp: Vec<f32> = (0..37).map(|i| ((i * 7919) % 101) as f32 - 50.0).collect();
        let mut with_nan = ramp.clone();
        with_nan[3] = f32::NAN;
        with_nan[20] = f32::NAN;
        let mut with_inf = ramp.clone();
        with_inf[33] = f32::INFINITY;
        let cases = [
            vec![],
            vec![f32::NAN; 11],
            vec![-0.0, 0.0, -0.0, -1.0, -0.0, -2.0, -3.0, -4.0, 0.0],
            vec![f32::NEG_INFINITY; 9],
            ramp,
            with_nan,
            with_inf,
        ];
        for s in cases {
            let (lanes, folded) = (max_of(&s), fold(&s));
            // Equal values; a zero's sign may differ (see `max_of`).
            assert_eq!(lanes, folded, "{s:?}");
        }
    }

    #[test]
    fn matches_naive_attention_on_odd_shapes() {
        let dm = AttentionDims {
            num_heads: 6,
            num_kv_heads: 2,
            head_dim: 13,
            len: 5,
            context: 9,
            start: 4,
        };
        let q = data(6 * 5 * 13, 1);
        let k = data(2 * 9 * 13, 2);
        let v = data(2 * 9 * 13, 3);
        let a = causal_attention_rows(&q, &k, &v, dm);
        let b = naive(&q, &k, &v, dm);
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() < 1e-5, "{x} vs {y}");
        }
    }

    #[test]
    fn rows_are_bit_identical_however_the_queries_are_chunked() {
        let (h, kvh, d, ctx) = (4, 2, 16, 12);
        let q = data(h * ctx * d, 7);
        let k = data(kvh * ctx * d, 8);
        let v = data(kvh * ctx * d, 9);
        let whole = causal_attention_rows(
            &q,
            &k,
            &v,
            AttentionDims {
                num_heads: h,
                num_kv_heads: kvh,
                head_dim: d,
                len: ctx,
                context: ctx,
                start: 0,
            },
        );
        // The last 3 queries as their own chunk.
        let mut q_tail = Vec::new();
        for hh in 0..h {
            q_tail.extend_from_slice(&q[(hh * ctx + 9) * d..(hh * ctx + 12) * d]);
        }
        let tail = causal_attention_rows(
            &q_tail,
            &k,
            &v,
            AttentionDims {
                num_heads: h,
                num_kv_heads: kvh,
                head_dim: d,
                len: 3,
                context: ctx,
                start: 9,
            },
        );
        let width = h * d;
        assert_eq!(&whole[9 * width..], &tail[..], "chunked rows differ");
    }
}
