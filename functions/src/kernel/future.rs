//! The one future type the kernel's ports and hooks return: a leaf every kernel module may use.

use std::future::Future;
use std::pin::Pin;

/// A boxed, sendable future borrowing its port for `'a`.
pub type PortFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
