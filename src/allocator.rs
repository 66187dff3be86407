//! The global allocator of the `a2a-server` binary: mimalloc, asked the way glibc's `malloc`
//! is asked by Rust's own `System` allocator.
//!
//! The `mimalloc` crate sends every allocation through `mi_malloc_aligned`, whose fast path
//! still checks the alignment and that the free block it found happens to be aligned: about
//! 25 instructions more than `mi_malloc` per allocation, and a quick SendMessage makes some
//! sixty. mimalloc's plain calls return blocks of 16 bytes or more aligned to 16
//! (`MI_MAX_ALIGN_SIZE`; `_mi_page_malloc` asserts it) and smaller ones to 8, so, as
//! mimalloc's own `mi_malloc_is_naturally_aligned` decides, an alignment of at most 16 and at
//! most the size takes the plain calls, and only a larger one the aligned calls. (A debug
//! build of mimalloc sampling "guarded" blocks precisely can break that; this build has none.)
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// The alignment mimalloc's plain calls guarantee for blocks at least this large
/// (`MI_MAX_ALIGN_SIZE`).
const PLAIN_ALIGN: usize = 16;

/// mimalloc (version 2) as the global allocator; see the module doc.
pub struct Mimalloc;

/// Whether a block of `size` bytes aligned to `align` can come from the plain calls.
fn plain(align: usize, size: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

/// A block for `layout` from the `plain` call where its alignment suffices, else from the
/// `aligned` one (both inline to direct calls).
///
/// # Safety
/// `plain_call` and `aligned_call` are mimalloc's allocation calls.
#[inline(always)]
unsafe fn allocate(
    layout: Layout,
    plain_call: unsafe extern "C" fn(usize) -> *mut c_void,
    aligned_call: unsafe extern "C" fn(usize, usize) -> *mut c_void,
) -> *mut u8 {
    // SAFETY: the caller passes mimalloc's calls, which take any size and alignment.
    unsafe {
        if plain(layout.align(), layout.size()) {
            plain_call(layout.size()).cast()
        } else {
            aligned_call(layout.size(), layout.align()).cast()
        }
    }
}

// SAFETY: every block comes from mimalloc and goes back to it (`mi_free` takes blocks from
// the plain and the aligned calls alike); the plain calls are used only for alignments they
// guarantee, the aligned calls otherwise.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's calls take any size and a power-of-two alignment (`Layout`).
        unsafe { allocate(layout, mi::mi_malloc, mi::mi_malloc_aligned) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe { allocate(layout, mi::mi_zalloc, mi::mi_zalloc_aligned) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator (the `GlobalAlloc` contract).
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout` (the `GlobalAlloc` contract);
        // the new block keeps the alignment, plain or asked for.
        unsafe {
            if plain(layout.align(), new_size) {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of every alignment up to a page, at sizes around mimalloc's size classes, come
    /// back aligned, zeroed when asked, and keep their bytes when they grow and shrink.
    #[test]
    fn blocks_are_aligned_and_keep_their_bytes() {
        for align in [1, 2, 4, 8, 16, 32, 64, 128, 4096] {
            for size in [1, 7, 8, 9, 15, 16, 17, 24, 40, 72, 120, 1000, 1024, 1500, 70_000, 5 << 20] {
                let layout = Layout::from_size_align(size, align).unwrap();
                let aligned = |block: *mut u8| !block.is_null() && (block as usize).is_multiple_of(align);
                // SAFETY: non-zero sizes; each block is read within its size and freed once.
                unsafe {
                    let zeroed = Mimalloc.alloc_zeroed(layout);
                    assert!(aligned(zeroed), "zeroed {size} {align}");
                    assert!(std::slice::from_raw_parts(zeroed, size).iter().all(|&b| b == 0));
                    Mimalloc.dealloc(zeroed, layout);

                    let block = Mimalloc.alloc(layout);
                    assert!(aligned(block), "{size} {align}");
                    std::ptr::write_bytes(block, 0xa5, size);
                    let grown = Mimalloc.realloc(block, layout, size * 3);
                    assert!(aligned(grown), "{size}×3 {align}");
                    assert!(std::slice::from_raw_parts(grown, size).iter().all(|&b| b == 0xa5));
                    let grown_layout = Layout::from_size_align(size * 3, align).unwrap();
                    let shrunk = Mimalloc.realloc(grown, grown_layout, size / 2 + 1);
                    assert!(aligned(shrunk), "{size}/2 {align}");
                    assert!(std::slice::from_raw_parts(shrunk, size / 2 + 1).iter().all(|&b| b == 0xa5));
                    Mimalloc.dealloc(shrunk, Layout::from_size_align(size / 2 + 1, align).unwrap());
                }
            }
        }
    }
}
