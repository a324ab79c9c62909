//! A token embedding in candle with the lookup JIT-compiled: `gather_jit_candle::Embedding` in
//! place of `candle_nn::Embedding`, the same results, a bad id's error, ONNX's negative ids,
//! and the two timed. Run with
//! `cargo run --release -p gather-jit-candle --example candle_embedding`.

use std::time::Instant;

use candle_core::{DType, Device, Module, Tensor};
use gather_jit_candle::{Embedding, IndexRules};

fn main() -> candle_core::Result<()> {
    let cpu = Device::Cpu;
    let (vocabulary, hidden) = (30522, 768);
    let table = Tensor::arange(0u32, (vocabulary * hidden) as u32, &cpu)?
        .to_dtype(DType::F32)?
        .reshape((vocabulary, hidden))?;
    // A batch of 8 sequences of 128 token ids.
    let ids: Vec<u32> = (0..8 * 128u32)
        .map(|i| (i * 7919) % vocabulary as u32)
        .collect();
    let ids = Tensor::from_vec(ids, (8, 128), &cpu)?;

    // The drop-in: same constructor, same `Module::forward`.
    let ours = Embedding::new(table.clone(), hidden);
    let theirs = candle_nn::Embedding::new(table.clone(), hidden);
    let embedded = ours.forward(&ids)?;
    println!("embedded: {:?} {:?}", embedded.dims(), embedded.dtype());
    let same = embedded
        .eq(&theirs.forward(&ids)?)?
        .flatten_all()?
        .min(0)?
        .to_scalar::<u8>()?;
    println!("same as candle_nn::Embedding: {}", same == 1);

    // A bad id is an error naming where it is, as candle's is an error.
    let bad = Tensor::new(&[[1u32, 2], [3, 40000]], &cpu)?;
    match ours.forward(&bad) {
        Ok(_) => println!("unexpected: id 40000 was accepted"),
        Err(error) => println!("bad id: {error}"),
    }

    // ONNX's rules: -1 is the last row.
    let onnx = Embedding::new(table, hidden).with_rules(IndexRules::Onnx);
    let last = onnx.forward(&Tensor::new(&[-1i64], &cpu)?)?;
    println!(
        "id -1, first column: {}",
        last.get(0)?.get(0)?.to_scalar::<f32>()?
    );

    // Timed: the first call compiled the kernel; these reuse it.
    for (name, module) in [("candle_nn", &theirs as &dyn Module), ("gather-jit", &ours)] {
        let calls = 200;
        let started = Instant::now();
        for _ in 0..calls {
            std::hint::black_box(module.forward(&ids)?);
        }
        println!("{name}: {:?} per forward", started.elapsed() / calls);
    }
    Ok(())
}
