//! The buffer a request body is read into.
//!
//! Small bodies (the usual tool call) live in an ordinary allocation. Large or undeclared ones
//! live in a private anonymous mapping of their own, unmapped when the last reference to the
//! bytes is dropped: the process allocator (mimalloc) keeps freed large blocks for reuse
//! instead of returning them to the system, so a burst of multi-megabyte uploads would
//! otherwise leave the process that much larger for good. A mapping's untouched pages cost no
//! memory, so an undeclared body can reserve the whole body limit up front.

use std::num::NonZeroUsize;
use std::ptr::NonNull;

use axum::body::Bytes;
use nix::sys::mman::{MapFlags, ProtFlags, mmap_anonymous, munmap};

/// Declared bodies at least this long get a mapping of their own.
pub const MAPPED_FROM: usize = 64 * 1024;

/// A request body being read: at most `capacity` bytes.
pub enum BodyBuffer {
    /// An ordinary allocation.
    Heap(Vec<u8>),
    /// A private mapping.
    Mapped(Mapping),
}

impl BodyBuffer {
    /// A buffer for a body of `declared` bytes, or of at most `limit` bytes when undeclared.
    pub fn for_body(declared: Option<usize>, limit: usize) -> BodyBuffer {
        match declared {
            Some(n) if n < MAPPED_FROM => BodyBuffer::Heap(Vec::with_capacity(n)),
            other => {
                let capacity = other.unwrap_or(limit);
                match Mapping::new(capacity) {
                    Some(m) => BodyBuffer::Mapped(m),
                    // Mapping failed (address space exhausted): fall back to the heap, which
                    // grows as the body arrives.
                    None => BodyBuffer::Heap(Vec::with_capacity(capacity.min(MAPPED_FROM))),
                }
            }
        }
    }

    /// Bytes written so far.
    pub fn filled(&self) -> usize {
        match self {
            BodyBuffer::Heap(v) => v.len(),
            BodyBuffer::Mapped(m) => m.len,
        }
    }

    /// Appends `data`; false (and nothing written) when a mapping has no room for it.
    pub fn extend(&mut self, data: &[u8]) -> bool {
        match self {
            BodyBuffer::Heap(v) => {
                v.extend_from_slice(data);
                true
            }
            BodyBuffer::Mapped(m) => m.extend(data),
        }
    }

    /// The bytes, without copying.
    pub fn freeze(self) -> Bytes {
        match self {
            BodyBuffer::Heap(v) => Bytes::from(v),
            BodyBuffer::Mapped(m) if m.len == 0 => Bytes::new(),
            BodyBuffer::Mapped(m) => Bytes::from_owner(m),
        }
    }
}

/// A private, anonymous, read-write mapping with a fill level, unmapped on drop.
pub struct Mapping {
    ptr: NonNull<u8>,
    capacity: NonZeroUsize,
    len: usize,
}

// SAFETY: the mapping is owned exclusively by this value (no other pointer to it exists), so
// it may move between threads; shared references only read the filled prefix.
unsafe impl Send for Mapping {}
// SAFETY: `&Mapping` allows only reads of initialized bytes (`as_ref`).
unsafe impl Sync for Mapping {}

impl Mapping {
    fn new(capacity: usize) -> Option<Mapping> {
        let capacity = NonZeroUsize::new(capacity)?;
        // SAFETY: a fresh anonymous private mapping at an address of the kernel's choosing
        // aliases no existing memory.
        let ptr = unsafe {
            mmap_anonymous(
                None,
                capacity,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_PRIVATE,
            )
        }
        .ok()?;
        Some(Mapping {
            ptr: ptr.cast(),
            capacity,
            len: 0,
        })
    }

    fn extend(&mut self, data: &[u8]) -> bool {
        if data.len() > self.capacity.get() - self.len {
            return false;
        }
        // SAFETY: the destination range `len..len + data.len()` lies inside the mapping (checked
        // above), which is writable and owned by `self`; `data` cannot overlap it.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.ptr.as_ptr().add(self.len),
                data.len(),
            );
        }
        self.len += data.len();
        true
    }
}

impl AsRef<[u8]> for Mapping {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the first `len` bytes of the mapping were written by `extend`; the mapping
        // lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr` and `capacity` describe exactly the mapping made in `new`, and no
        // reference into it outlives `self`.
        if let Err(e) = unsafe { munmap(self.ptr.cast(), self.capacity.get()) } {
            tracing::error!(error = %e, "could not unmap a request body buffer");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_declared_bodies_use_the_heap_and_large_or_undeclared_ones_a_mapping() {
        assert!(matches!(
            BodyBuffer::for_body(Some(100), 4096),
            BodyBuffer::Heap(_)
        ));
        assert!(matches!(
            BodyBuffer::for_body(Some(MAPPED_FROM), 1 << 22),
            BodyBuffer::Mapped(_)
        ));
        assert!(matches!(
            BodyBuffer::for_body(None, 1 << 22),
            BodyBuffer::Mapped(_)
        ));
    }

    #[test]
    fn a_mapping_keeps_what_was_written_and_refuses_more_than_it_holds() {
        let mut b = BodyBuffer::for_body(Some(MAPPED_FROM), MAPPED_FROM);
        assert_eq!(b.filled(), 0);
        assert!(b.extend(b"hello "));
        assert!(b.extend(&vec![b'x'; MAPPED_FROM - 6]));
        assert!(!b.extend(b"!"), "one byte past the capacity");
        assert_eq!(b.filled(), MAPPED_FROM);
        let bytes = b.freeze();
        assert_eq!(&bytes[..6], b"hello ");
        let shared = bytes.clone();
        drop(bytes);
        assert_eq!(shared.len(), MAPPED_FROM);
        assert!(BodyBuffer::for_body(None, 1024).freeze().is_empty());
    }
}
