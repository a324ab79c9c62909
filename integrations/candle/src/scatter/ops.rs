//! candle's op traits for [`JitScatter`] (out of place, in place, and the gradient's scatter
//! onto zeros): each dispatches on the element type to the kernels of `plan.rs`.

use candle_core::backend::{BackendDevice, BackendStorage};
use candle_core::{CpuStorage, CustomOp2, CustomOp3, InplaceOp3, Layout, Shape, Tensor};
use gather_jit::DType;

use super::{JitScatter, Kind};
use crate::error::msg;

fn dtype_mismatch(name: &str, data: &CpuStorage, source: &CpuStorage) -> candle_core::Error {
    msg(format!(
        "{name}: data is {:?} but source is {:?}",
        data.dtype(),
        source.dtype()
    ))
}

/// Dispatches on the element type of data and source, which must agree: `$body` with `$d` and
/// `$s` their elements and `$dtype` gather-jit's dtype, or `$f8` for `f8e4m3` sums.
macro_rules! by_dtype {
    (
        $self:ident, $data:expr, $source:expr,
        |$d:ident, $s:ident, $dtype:ident| $body:expr, $f8:expr
    ) => {
        match ($data, $source) {
            (CpuStorage::U8($d), CpuStorage::U8($s)) => {
                let $dtype = DType::U8;
                $body
            }
            (CpuStorage::U32($d), CpuStorage::U32($s)) => {
                let $dtype = DType::U32;
                $body
            }
            (CpuStorage::I16($d), CpuStorage::I16($s)) => {
                let $dtype = DType::I16;
                $body
            }
            (CpuStorage::I32($d), CpuStorage::I32($s)) => {
                let $dtype = DType::I32;
                $body
            }
            (CpuStorage::I64($d), CpuStorage::I64($s)) => {
                let $dtype = DType::I64;
                $body
            }
            (CpuStorage::BF16($d), CpuStorage::BF16($s)) => {
                let $dtype = DType::Bf16;
                $body
            }
            (CpuStorage::F16($d), CpuStorage::F16($s)) => {
                let $dtype = DType::F16;
                $body
            }
            (CpuStorage::F32($d), CpuStorage::F32($s)) => {
                let $dtype = DType::F32;
                $body
            }
            (CpuStorage::F64($d), CpuStorage::F64($s)) => {
                let $dtype = DType::F64;
                $body
            }
            // Without arithmetic, f8e4m3 moves as bytes.
            (CpuStorage::F8E4M3($d), CpuStorage::F8E4M3($s)) if !$self.kind.sums() => {
                let $dtype = DType::U8;
                $body
            }
            (CpuStorage::F8E4M3(_), CpuStorage::F8E4M3(_)) => $f8,
            (data, source) if data.dtype() == source.dtype() => Err(msg(format!(
                "{}: data of dtype {:?} is not supported",
                $self.name(),
                data.dtype()
            ))),
            (data, source) => Err(dtype_mismatch($self.name(), data, source)),
        }
    };
}

impl CustomOp3 for JitScatter {
    fn name(&self) -> &'static str {
        JitScatter::name(self)
    }

    fn cpu_fwd(
        &self,
        data: &CpuStorage,
        data_layout: &Layout,
        indices: &CpuStorage,
        indices_layout: &Layout,
        source: &CpuStorage,
        source_layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let ids = (indices, indices_layout);
        by_dtype!(
            self,
            data,
            source,
            |d, s, dtype| self.out_of_place(
                dtype,
                (&d[..], data_layout),
                ids,
                (&s[..], source_layout)
            ),
            {
                let out = self.f8_sum(data, data_layout, ids, (source, source_layout))?;
                Ok((out, data_layout.shape().clone()))
            }
        )
    }

    fn bwd(
        &self,
        _data: &Tensor,
        indices: &Tensor,
        source: &Tensor,
        _result: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let source_grad = self.source_gather().apply(grad, indices)?;
        let data_grad = match self.kind {
            // The elements written over take no part in the result.
            Kind::Scatter { .. } => self.apply(grad, indices, &source.zeros_like()?)?,
            _ => grad.clone(),
        };
        Ok((Some(data_grad), None, Some(source_grad)))
    }
}

impl InplaceOp3 for JitScatter {
    fn name(&self) -> &'static str {
        JitScatter::name(self)
    }

    fn cpu_fwd(
        &self,
        data: &mut CpuStorage,
        data_layout: &Layout,
        indices: &CpuStorage,
        indices_layout: &Layout,
        source: &CpuStorage,
        source_layout: &Layout,
    ) -> candle_core::Result<()> {
        let ids = (indices, indices_layout);
        if !data_layout.is_contiguous() {
            return Err(msg(format!(
                "{}: in place, data must be contiguous (as candle's own requires)",
                self.name()
            )));
        }
        if let (CpuStorage::F8E4M3(_), true) = (&*data, self.kind.sums()) {
            // Computed aside and copied in: candle's own in-place loop stops at a bad index
            // with the earlier updates applied.
            let sum = self.f8_sum(data, data_layout, ids, (source, source_layout))?;
            let layout = Layout::contiguous(data_layout.shape());
            return sum.copy_strided_src(data, data_layout.start_offset(), &layout);
        }
        by_dtype!(
            self,
            data,
            source,
            |d, s, dtype| self.in_place(
                dtype,
                (&mut d[..], data_layout),
                ids,
                (&s[..], source_layout)
            ),
            unreachable!("f8e4m3 sums returned above")
        )
    }
}

/// [`JitScatter`] into new zeros: the gradient of a gather ([`CustomOp2`]: indices, then
/// updates).
pub(super) struct OntoZeros {
    /// The scatter whose gradient this is.
    pub scatter: JitScatter,
    /// The shape of the zeros the updates land on.
    pub shape: Vec<usize>,
}

impl CustomOp2 for OntoZeros {
    fn name(&self) -> &'static str {
        JitScatter::name(&self.scatter)
    }

    fn cpu_fwd(
        &self,
        indices: &CpuStorage,
        indices_layout: &Layout,
        updates: &CpuStorage,
        updates_layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let scatter = &self.scatter;
        let ids = (indices, indices_layout);
        let shape = &self.shape;
        by_dtype!(
            scatter,
            updates,
            updates,
            |u, _same, dtype| scatter.onto_zeros_typed(dtype, shape, ids, (&u[..], updates_layout)),
            {
                let zeros_shape = Shape::from(shape.as_slice());
                let zeros = updates.device().zeros_impl(&zeros_shape, updates.dtype())?;
                let layout = Layout::contiguous(&zeros_shape);
                let out = scatter.f8_sum(&zeros, &layout, ids, (updates, updates_layout))?;
                Ok((out, zeros_shape))
            }
        )
    }
}
