//! How the int8 GEMM cuts an `m × n` output into parallel tasks (shared by every path).

use std::marker::PhantomData;

use rayon::prelude::*;

/// Rows per task: enough quantized activations to fill about half of a 1 MiB L2, so that
/// each weight column unit is read from memory once per row tile.
pub(crate) fn tile_rows(row_bytes: usize, mr: usize) -> usize {
    ((512 * 1024) / row_bytes.max(1)).clamp(mr, 256) / mr * mr
}

/// Row tiles when there are enough of them for the threads, otherwise column chunks, each
/// task writing its part of the output in place.
pub(crate) struct Split {
    pub m: usize,
    pub n: usize,
    /// Output columns per column unit (the last unit may be partial).
    pub unit_cols: usize,
    pub units: usize,
    /// Column chunks are a multiple of this many units.
    pub unit_align: usize,
    pub tile_rows: usize,
}

/// The rows and columns of the output that one task writes: for the `rows` and `units` that
/// [`Split::run`] passes with it, its row `i` is output row `rows.start + i`, and its column
/// `c` is the first column of unit `units.start` plus `c`. Column chunks of the same rows are
/// interleaved in memory, so a task holds a pointer rather than a slice; [`OutRows::row`]
/// hands out one row's columns at a time.
pub(crate) struct OutRows<'a> {
    first: *mut f32,
    rows: usize,
    cols: usize,
    stride: usize,
    _out: PhantomData<&'a mut [f32]>,
}

// SAFETY: an `OutRows` is the only way to its cells (`Split::run` gives each task cells no
// other task's covers), so moving it to another thread is moving a `&mut` to them.
unsafe impl Send for OutRows<'_> {}

impl OutRows<'_> {
    /// Columns per row.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Row `i`'s columns.
    pub fn row(&mut self, i: usize) -> &mut [f32] {
        assert!(i < self.rows, "row {i} of {}", self.rows);
        // SAFETY: `Split::run` made `first + i * stride .. + cols` lie in the output for every
        // `i < rows`, and no other task's cells overlap them; `&mut self` keeps this task's
        // rows from being borrowed twice.
        unsafe { std::slice::from_raw_parts_mut(self.first.add(i * self.stride), self.cols) }
    }
}

/// The output's first cell, shared by the column-chunk tasks, each of which builds its own
/// [`OutRows`] from it.
struct OutPtr(*mut f32);

// SAFETY: the pointer is only offset to the first column of disjoint column chunks.
unsafe impl Sync for OutPtr {}

impl OutPtr {
    fn at(&self, col: usize) -> *mut f32 {
        self.0.wrapping_add(col)
    }
}

impl Split {
    /// `work(rows, units, out)` fills `out`: the rows `rows` of the output, in the columns of
    /// units `units`.
    pub fn run<F>(&self, out: &mut [f32], work: F)
    where
        F: Fn(std::ops::Range<usize>, std::ops::Range<usize>, OutRows<'_>) + Sync,
    {
        let (m, n, tile_rows) = (self.m, self.n, self.tile_rows);
        assert_eq!(out.len(), m * n, "output of {m} x {n}");
        let threads = rayon::current_num_threads().max(1);
        if m.div_ceil(tile_rows) >= 2 * threads || self.units < 2 * self.unit_align * threads {
            out.par_chunks_mut(tile_rows * n)
                .enumerate()
                .for_each(|(t, out_tile)| {
                    let r0 = t * tile_rows;
                    let rows = out_tile.len() / n;
                    let tile = OutRows {
                        first: out_tile.as_mut_ptr(),
                        rows,
                        cols: n,
                        stride: n,
                        _out: PhantomData,
                    };
                    work(r0..r0 + rows, 0..self.units, tile);
                });
            return;
        }
        // Each chunk writes its columns of every row straight into `out`. (A zeroed buffer per
        // chunk and a copy after: the copy alone was 1% of the samples of a 16-way decode.)
        let chunk = self.units.div_ceil(2 * threads).div_ceil(self.unit_align) * self.unit_align;
        let base = OutPtr(out.as_mut_ptr());
        (0..self.units.div_ceil(chunk))
            .into_par_iter()
            .for_each(|c| {
                let u0 = c * chunk;
                let u1 = (u0 + chunk).min(self.units);
                let c0 = u0 * self.unit_cols;
                let cols = (u1 * self.unit_cols).min(n) - c0;
                // Chunks cover disjoint unit ranges, so disjoint columns `c0..c0 + cols` of
                // every row; `c0 + cols <= n`, and `out` has `m` rows of `n`.
                let part = OutRows {
                    first: base.at(c0),
                    rows: m,
                    cols,
                    stride: n,
                    _out: PhantomData,
                };
                work(0..m, u0..u1, part);
            });
    }
}
