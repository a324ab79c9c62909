//! A runtime's own kernel cache: compile a model's gathers in parallel when it loads, serve
//! each request from the cache without a lock, and let a new batch size reuse the machine
//! code of a kernel it already has. Run with `cargo run --release --example runtime_cache`.

use gather_jit::{KernelCache, Signature};

/// The gathers of a small model for a batch of `batch` sequences of 16 tokens.
fn model_gathers(batch: usize) -> Vec<Signature> {
    vec![
        // Token embeddings: ids [batch, 16] into a [5000, 128] table.
        Signature::gather(&[5000, 128], &[batch, 16], 0, 0),
        // Position embeddings: [16] positions into a [512, 128] table.
        Signature::gather(&[512, 128], &[16], 0, 0),
        // The last position of each sequence: GatherND with one batch dim.
        Signature::gather_nd(&[batch, 16, 128], &[batch, 1], 1),
    ]
}

fn main() -> Result<(), gather_jit::Error> {
    // A cache of the runtime's own, bounded (the crate also has a process-wide one behind
    // `gather_jit::jit`).
    let cache = KernelCache::new(256);

    // Load: every gather of the model at once, compiled on the crate's worker threads.
    let loaded = cache.get_all(&model_gathers(1));
    for kernel in &loaded {
        let kernel = kernel.as_ref().map_err(Clone::clone)?;
        println!(
            "{}: compiled in {:?}",
            kernel.signature(),
            kernel.compile_time()
        );
    }

    // Serve: each request lends the cached kernel to a closure (no lock, no reference count).
    let signature = &model_gathers(1)[0];
    let table: Vec<u8> = (0..5000 * 128 * 4).map(|i| (i % 251) as u8).collect();
    let ids: Vec<u8> = (0..16i64).flat_map(|i| (i * 300).to_ne_bytes()).collect();
    let mut output = vec![0u8; 16 * 128 * 4];
    for _ in 0..100 {
        cache.with(signature, |kernel| {
            kernel.run_bytes(&table, &ids, &mut output)
        })??;
    }

    // A new batch size: new signatures. Where the loop nest differs only in its outermost
    // length (the token embedding) the batch-1 kernel's code is reused, in microseconds; the
    // position embedding is the same signature (a hit); the GatherND, whose batch dim no
    // longer folds away, is compiled.
    for kernel in cache.get_all(&model_gathers(8)) {
        let kernel = kernel?;
        println!(
            "{}: {} in {:?}",
            kernel.signature(),
            if kernel.reuses_code() {
                "reused code"
            } else {
                "compiled"
            },
            kernel.compile_time()
        );
    }
    let stats = cache.stats();
    println!(
        "{} hits, {} misses, {} compiled, {} built on shared code",
        stats.hits, stats.misses, stats.compilations, stats.shared_code
    );

    // Unload: dropping the cache frees every kernel that no one else holds, on every thread.
    drop(cache);
    Ok(())
}
