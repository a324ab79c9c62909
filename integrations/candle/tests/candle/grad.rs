//! Backward passes: the gradients of the JIT gathers (through the JIT scatters) and of the JIT
//! scatters, against candle's own ops' gradients bit for bit, and a small embedding model
//! trained both ways.

use candle_core::{DType, Module, Tensor, Var};
use candle_nn::optim::{AdamW, Optimizer, ParamsAdamW, SGD};
use gather_jit_candle::{Embedding, GatherJitExt};
use gather_jit_workloads::XorShift;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use crate::common::*;

const FLOATS: [DType; 4] = [DType::F16, DType::BF16, DType::F32, DType::F64];

/// Which gather a case differentiates.
#[derive(Clone, Copy, Debug)]
enum Gather {
    IndexSelect,
    Take,
    Elements,
    Embedding,
}

/// Values of `dtype` that are multiples of 1/256 in [-8, 8): exact in every float dtype,
/// and so are their sums here, far from subnormals. candle adds a custom op's gradient to the
/// zeros it starts from with its `add`, where its own ops' backward passes scatter straight
/// into them, and its vectorised `bf16` add flushes subnormals to zero (`0 + 0x803f` gives
/// `0x8000`): random bits would compare candle's add, not the scatters (whose bits
/// `scatter.rs` compares on random bits, NaNs and subnormals included).
fn finite_tensor(dtype: DType, dims: &[usize], rng: &mut XorShift) -> Tensor {
    let count: usize = dims.iter().product();
    let values: Vec<f64> = (0..count)
        .map(|_| (rng.below(4096) as f64 - 2048.) / 256.)
        .collect();
    Tensor::from_vec(values, dims, &cpu())
        .and_then(|t| t.to_dtype(dtype))
        .expect("values")
}

/// The gradient of `sum(f(table) * weights)` with respect to `table`, a variable holding
/// `values`.
fn gradient(
    values: &Tensor,
    f: impl Fn(&Tensor) -> candle_core::Result<Tensor>,
    rng_seed: u64,
) -> candle_core::Result<Tensor> {
    let table = Var::from_tensor(&values.copy()?)?;
    let out = f(table.as_tensor())?;
    let mut rng = XorShift::new(rng_seed);
    let weights = finite_tensor(out.dtype(), out.dims(), &mut rng);
    let loss = out.mul(&weights)?.sum_all()?;
    let grads = loss.backward()?;
    grads
        .get(table.as_tensor())
        .cloned()
        .ok_or_else(|| candle_core::Error::Msg("no gradient".into()))
}

/// Both gradients computed and equal bit for bit, or both failed; or, for a table with no
/// elements, candle's failed and ours is empty: candle's `index_select` reads no id when the
/// dims before `dim` are empty (nor does ours), but its backward pass, `index_add`, checks them
/// all, so a bad id fails there only.
fn same_gradient(
    values: &Tensor,
    native: candle_core::Result<Tensor>,
    jit: candle_core::Result<Tensor>,
) -> Result<(), TestCaseError> {
    if let (Err(_), Ok(jit)) = (&native, &jit)
        && values.elem_count() == 0
    {
        prop_assert_eq!(jit.dims(), values.dims());
        return Ok(());
    }
    same(native, jit)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The table's gradient through each JIT gather equals candle's through its own op, bit
    /// for bit: both sum the rows in the ids' order into zeros.
    #[test]
    fn gather_gradients_match_candle(
        data_dims in dims(3),
        dim_seed in any::<usize>(),
        ids_dims in prop::collection::vec(0usize..5, 0..=2),
        which in prop::sample::select(
            vec![Gather::IndexSelect, Gather::Take, Gather::Elements, Gather::Embedding],
        ),
        dtype in prop::sample::select(FLOATS.to_vec()),
        index_dtype in prop::sample::select(INDEX_DTYPES.to_vec()),
        mix in mix(),
        seed in any::<u64>(),
    ) {
        let mut rng = XorShift::new(seed);
        let (data_dims, dim) = match which {
            // A table: [vocabulary, hidden].
            Gather::Embedding => {
                (vec![data_dims[0], data_dims.get(1).copied().unwrap_or(3).max(1)], 0)
            }
            _ => (data_dims.clone(), dim_seed % data_dims.len()),
        };
        let values = finite_tensor(dtype, &data_dims, &mut rng);
        let ids_dims = match which {
            Gather::IndexSelect => vec![ids_dims.first().copied().unwrap_or(2)],
            Gather::Elements => {
                let mut dims = data_dims.clone();
                dims[dim] = ids_dims.first().copied().unwrap_or(2);
                dims
            }
            Gather::Take | Gather::Embedding => ids_dims,
        };
        let count: usize = ids_dims.iter().product();
        let ids: Vec<i128> =
            (0..count).map(|_| random_index(data_dims[dim], index_dtype, mix, &mut rng)).collect();
        let ids = index_tensor(&ids, &ids_dims, index_dtype);
        let hidden = data_dims[data_dims.len() - 1];
        let mut take_shape = data_dims[..dim].to_vec();
        take_shape.extend_from_slice(&ids_dims);
        take_shape.extend_from_slice(&data_dims[dim + 1..]);
        let native = gradient(&values, |t| match which {
            Gather::IndexSelect => t.index_select(&ids, dim),
            Gather::Take => {
                t.index_select(&ids.flatten_all()?, dim)?.reshape(take_shape.as_slice())
            }
            Gather::Elements => t.gather(&ids, dim),
            Gather::Embedding => candle_nn::Embedding::new(t.clone(), hidden).forward(&ids),
        }, seed);
        let jit = gradient(&values, |t| match which {
            Gather::IndexSelect => t.jit_index_select(&ids, dim),
            Gather::Take => t.jit_take(&ids, dim),
            Gather::Elements => t.jit_gather(&ids, dim),
            Gather::Embedding => Embedding::new(t.clone(), hidden).forward(&ids),
        }, seed);
        same_gradient(&values, native, jit)?;
    }

    /// GatherND's gradient (any batch dims) equals candle's through what a candle user writes
    /// instead: each tuple folded into a row number, then `index_select` of rows.
    #[test]
    fn gather_nd_gradient_matches_candle_ops(
        data_dims in dims(4),
        batch_seed in any::<usize>(),
        depth_seed in any::<usize>(),
        middle in prop::collection::vec(0usize..4, 0..=2),
        dtype in prop::sample::select(FLOATS.to_vec()),
        seed in any::<u64>(),
    ) {
        let mut rng = XorShift::new(seed);
        let rank = data_dims.len();
        let batch_dims = batch_seed % rank;
        let depth = 1 + depth_seed % (rank - batch_dims);
        let width = batch_dims + depth;
        let values = finite_tensor(dtype, &data_dims, &mut rng);
        let mut ids_dims = data_dims[..batch_dims].to_vec();
        ids_dims.extend_from_slice(&middle);
        ids_dims.push(depth);
        let count: usize = ids_dims.iter().product();
        let ids: Vec<i128> = (0..count)
            .map(|flat| {
                let size = data_dims[batch_dims + flat % depth];
                random_index(size, DType::I64, Mix::Clean, &mut rng)
            })
            .collect();
        // Each tuple's row of data seen as `[rows, rest]`: its batch coordinates, then its own.
        let tuple_dims = &ids_dims[..ids_dims.len() - 1];
        let numbers: Vec<i128> = ids
            .chunks(depth)
            .enumerate()
            .map(|(t, tuple)| {
                let mut rest = t;
                let mut position = vec![0; tuple_dims.len()];
                for (p, &d) in position.iter_mut().zip(tuple_dims).rev() {
                    *p = rest % d;
                    rest /= d;
                }
                let batch = position[..batch_dims].iter().map(|&p| p as i128);
                let coordinates = batch.chain(tuple.iter().copied());
                coordinates.zip(&data_dims[..width]).fold(0, |n, (v, &d)| n * d as i128 + v)
            })
            .collect();
        let tuples = numbers.len();
        let numbers = index_tensor(&numbers, &[tuples], DType::I64);
        let ids = index_tensor(&ids, &ids_dims, DType::I64);
        let rows: usize = data_dims[..width].iter().product();
        let mut flat_shape = vec![rows];
        flat_shape.extend_from_slice(&data_dims[width..]);
        let mut shape = tuple_dims.to_vec();
        shape.extend_from_slice(&data_dims[width..]);
        let native = gradient(&values, |t| {
            t.reshape(flat_shape.as_slice())?.index_select(&numbers, 0)?.reshape(shape.as_slice())
        }, seed);
        let jit = gradient(&values, |t| t.jit_gather_nd(&ids, batch_dims), seed);
        same_gradient(&values, native, jit)?;
    }
}

/// The gradients of `sum(scatter(data, ids, source) * weights)` for data and source.
fn scatter_gradients(
    data: &Tensor,
    source: &Tensor,
    weights: &Tensor,
    f: impl Fn(&Tensor, &Tensor) -> candle_core::Result<Tensor>,
) -> candle_core::Result<(Tensor, Tensor)> {
    let (data, source) = (Var::from_tensor(data)?, Var::from_tensor(source)?);
    let loss = f(data.as_tensor(), source.as_tensor())?
        .mul(weights)?
        .sum_all()?;
    let grads = loss.backward()?;
    let get = |v: &Var| {
        grads
            .get(v.as_tensor())
            .cloned()
            .ok_or_else(|| candle_core::Error::Msg("no gradient".into()))
    };
    Ok((get(&data)?, get(&source)?))
}

#[test]
fn scatter_gradients_are_the_scatters_derivatives() -> candle_core::Result<()> {
    let mut rng = XorShift::new(5);
    let data = random_tensor(DType::F32, &[4, 3], &mut rng);
    // Of data's shape: candle's own scatter_add backward fails on any other (its mask is
    // made in the source's shape).
    let source = random_tensor(DType::F32, &[4, 3], &mut rng);
    let weights = random_tensor(DType::F32, &[4, 3], &mut rng);
    // Repeats, and u32's maximum (skipped: its update reaches nothing).
    let ids = Tensor::new(
        &[[2u32, 2, 0], [0, u32::MAX, 0], [2, 1, 1], [1, 1, 2]],
        &cpu(),
    )?;
    let dim = 1;
    let rows = Tensor::new(&[3u32, 0, 3, u32::MAX], &cpu())?;
    let row_source = random_tensor(DType::F32, &[4, 3], &mut rng);

    // scatter_add: d/d data is the weights; d/d source the weights it landed on.
    let (d, s) = scatter_gradients(&data, &source, &weights, |d, s| {
        d.jit_scatter_add(&ids, s, dim)
    })?;
    assert_eq!(bytes(&d), bytes(&weights));
    assert_eq!(bytes(&s), bytes(&weights.gather(&ids, dim)?));
    // candle's own agrees on the source; on data it masks the elements added to, which is not
    // the derivative of a sum (it is that of `scatter`).
    let (native_d, native_s) =
        scatter_gradients(&data, &source, &weights, |d, s| d.scatter_add(&ids, s, dim))?;
    assert_eq!(bytes(&s), bytes(&native_s));
    assert_ne!(bytes(&d), bytes(&native_d));

    // scatter: the elements written over take no part; the source gets what it landed on.
    let (d, s) = scatter_gradients(&data, &source, &weights, |d, s| d.jit_scatter(&ids, s, dim))?;
    let masked = weights.scatter(&ids, &source.zeros_like()?, dim)?;
    assert_eq!(bytes(&d), bytes(&masked));
    assert_eq!(bytes(&s), bytes(&weights.gather(&ids, dim)?));

    // index_add: as candle's own, both gradients.
    let (d, s) = scatter_gradients(&data, &row_source, &weights, |d, s| {
        d.jit_index_add(&rows, s, 0)
    })?;
    let (native_d, native_s) = scatter_gradients(&data, &row_source, &weights, |d, s| {
        d.index_add(&rows, s, 0)
    })?;
    assert_eq!(bytes(&d), bytes(&native_d));
    assert_eq!(bytes(&s), bytes(&native_s));
    assert_eq!(bytes(&d), bytes(&weights));
    Ok(())
}

/// A token embedding and a linear layer, both variables.
struct Model {
    table: Var,
    weight: Var,
    bias: Var,
}

impl Model {
    fn new(seed: u64) -> candle_core::Result<Model> {
        let mut rng = XorShift::new(seed);
        // Small finite values: a model that trains.
        let mut uniform = |dims: &[usize]| {
            let count: usize = dims.iter().product();
            let values: Vec<f32> = (0..count)
                .map(|_| (rng.below(2001) as f32 - 1000.) / 4000.)
                .collect();
            Tensor::from_vec(values, dims, &cpu())
        };
        Ok(Model {
            table: Var::from_tensor(&uniform(&[50, 16])?)?,
            weight: Var::from_tensor(&uniform(&[8, 16])?)?,
            bias: Var::from_tensor(&uniform(&[8])?)?,
        })
    }

    fn vars(&self) -> Vec<Var> {
        vec![self.table.clone(), self.weight.clone(), self.bias.clone()]
    }

    /// Mean squared error of the model's outputs for `ids` against `target`, the lookup by
    /// the JIT `Embedding` or by candle_nn's.
    fn loss(&self, ids: &Tensor, target: &Tensor, jit: bool) -> candle_core::Result<Tensor> {
        let table = self.table.as_tensor().clone();
        let embedded = if jit {
            Embedding::new(table, 16).forward(ids)?
        } else {
            candle_nn::Embedding::new(table, 16).forward(ids)?
        };
        let linear = candle_nn::Linear::new(
            self.weight.as_tensor().clone(),
            Some(self.bias.as_tensor().clone()),
        );
        candle_nn::loss::mse(&linear.forward(&embedded)?, target)
    }
}

/// Trains the model both ways for a few steps with `optimizer`, checking every gradient and
/// every parameter after every step against candle's own, bit for bit.
fn train_both_ways<O: Optimizer>(
    new_optimizer: impl Fn(Vec<Var>) -> candle_core::Result<O>,
) -> candle_core::Result<()> {
    let (native, jit) = (Model::new(3)?, Model::new(3)?);
    let (mut native_opt, mut jit_opt) = (new_optimizer(native.vars())?, new_optimizer(jit.vars())?);
    let mut rng = XorShift::new(11);
    for step in 0..5 {
        // A batch of 4 sequences of 6 ids out of 50: repeats within and across sequences.
        let ids: Vec<u32> = (0..24).map(|_| rng.below(20) as u32).collect();
        let ids = Tensor::from_vec(ids, (4, 6), &cpu())?;
        let target = random_tensor(DType::F32, &[4, 6, 8], &mut rng).tanh()?;
        let native_loss = native.loss(&ids, &target, false)?;
        let jit_loss = jit.loss(&ids, &target, true)?;
        assert_eq!(bytes(&native_loss), bytes(&jit_loss), "loss at step {step}");
        let (native_grads, jit_grads) = (native_loss.backward()?, jit_loss.backward()?);
        for (i, (n, j)) in native.vars().iter().zip(jit.vars()).enumerate() {
            let n = native_grads.get(n.as_tensor()).expect("native gradient");
            let j = jit_grads.get(j.as_tensor()).expect("jit gradient");
            assert_eq!(
                bytes(n),
                bytes(j),
                "gradient of parameter {i} at step {step}"
            );
        }
        // The table's gradient is not zero only on the rows looked up.
        let table_grad = jit_grads.get(jit.table.as_tensor()).expect("gradient");
        let unused = table_grad
            .narrow(0, 20, 30)?
            .abs()?
            .sum_all()?
            .to_scalar::<f32>()?;
        assert_eq!(unused, 0.);
        native_opt.step(&native_grads)?;
        jit_opt.step(&jit_grads)?;
        for (i, (n, j)) in native.vars().iter().zip(jit.vars()).enumerate() {
            assert_eq!(
                bytes(n.as_tensor()),
                bytes(j.as_tensor()),
                "parameter {i} after step {step}"
            );
        }
    }
    Ok(())
}

#[test]
fn an_embedding_model_trains_as_with_candles_own_ops_sgd() -> candle_core::Result<()> {
    train_both_ways(|vars| SGD::new(vars, 0.5))
}

#[test]
fn an_embedding_model_trains_as_with_candles_own_ops_adamw() -> candle_core::Result<()> {
    train_both_ways(|vars| {
        AdamW::new(
            vars,
            ParamsAdamW {
                lr: 0.01,
                ..ParamsAdamW::default()
            },
        )
    })
}
