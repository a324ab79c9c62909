//! [`QuantizedEmbedding`]: an embedding over a GGUF `Q4_0` or `Q8_0` table whose rows are
//! dequantized as they are gathered, by a gather-jit kernel.

use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;

use candle_core::backend::BackendStorage;
use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{CpuStorage, CustomOp1, Layout, Module, Shape, Tensor};
use gather_jit::ir::OpName;
use gather_jit::ir::unravel;
use gather_jit::quant::{Quantization, quantized_output_shape};
use gather_jit::{DType, GgufFormat, IndexType, KernelCache, QuantizedSignature};

use crate::error::{allocation, from_jit, index_out_of_range, msg};
use crate::layout::{contiguous, element_count};

/// The op's name in errors and in candle's custom-op machinery.
const NAME: &str = "gather-jit-quantized-embedding";

/// The id types a call takes.
const INDEX_TYPES: [IndexType; 5] = [
    IndexType::U8,
    IndexType::U32,
    IndexType::I16,
    IndexType::I32,
    IndexType::I64,
];

/// Where the table's blocks live.
enum Blocks {
    /// In candle's tensor: borrowed at each call, never copied.
    Candle(Arc<QTensor>),
    /// Bytes read from a GGUF file or given by the caller.
    Bytes(Vec<u8>),
}

/// An embedding (`forward(ids)` of shape `ids.dims() + [hidden_size]`, `f32`) over a GGUF
/// `Q4_0` or `Q8_0` table that stays quantized: each call dequantizes only the rows its ids
/// select, inside a gather-jit kernel, where `candle_nn::Embedding` needs the whole table
/// dequantized first (4 bytes a value instead of 0.5625 or 1.0625).
///
/// The values are those of candle's own dequantization, bit for bit: `(q - 8) * d` for `Q4_0`,
/// `q * d` for `Q8_0`, in `f32`. Ids are `u8`, `u32` or `i64` (as candle's), or `i16`, `i32`,
/// of any shape and layout (strided ids are packed first); a negative or out-of-range id is an
/// error naming its position and value, as in `QTensor::embedding` (there is no
/// "type maximum selects zeros" rule, unlike [`Embedding`](crate::Embedding)). CPU only.
///
/// A call with `n` ids runs one kernel per bit of `n` (`2^k` ids each), so an embedding
/// compiles at most one kernel per power of two and id type, however many sequence lengths it
/// sees; kernels come from gather-jit's process-wide cache.
///
/// ```
/// use candle_core::quantized::{GgmlDType, QTensor};
/// use candle_core::{Device, Module, Tensor};
/// use gather_jit_candle::QuantizedEmbedding;
///
/// let table = Tensor::arange(0f32, 8. * 64., &Device::Cpu)?.reshape((8, 64))?;
/// let embedding = QuantizedEmbedding::new(QTensor::quantize(&table, GgmlDType::Q8_0)?)?;
/// let ids = Tensor::new(&[[7u32, 0], [3, 3]], &Device::Cpu)?;
/// let rows = embedding.forward(&ids)?;
/// assert_eq!(rows.dims(), [2, 2, 64]);
/// let error = embedding.forward(&Tensor::new(&[1u32, 8], &Device::Cpu)?).unwrap_err();
/// assert!(error.to_string().contains("index 8 at position [1]"), "{error}");
/// # Ok::<(), candle_core::Error>(())
/// ```
#[derive(Clone)]
pub struct QuantizedEmbedding {
    blocks: Arc<Blocks>,
    format: GgufFormat,
    vocabulary: usize,
    hidden_size: usize,
    /// Bytes of the table's blocks.
    table_bytes: usize,
}

impl std::fmt::Debug for QuantizedEmbedding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuantizedEmbedding")
            .field("format", &self.format)
            .field("vocabulary", &self.vocabulary)
            .field("hidden_size", &self.hidden_size)
            .finish_non_exhaustive()
    }
}

impl QuantizedEmbedding {
    /// The embedding of `table` (`[vocabulary, hidden_size]`, `Q4_0` or `Q8_0`, on the CPU),
    /// sharing its blocks.
    ///
    /// # Errors
    /// Another dtype (the message names the accepted ones), a table not 2-D or not on the CPU.
    pub fn new(table: QTensor) -> candle_core::Result<QuantizedEmbedding> {
        QuantizedEmbedding::from_arc(Arc::new(table))
    }

    /// As [`QuantizedEmbedding::new`], on a table shared with its other users.
    ///
    /// # Errors
    /// As [`QuantizedEmbedding::new`].
    pub fn from_arc(table: Arc<QTensor>) -> candle_core::Result<QuantizedEmbedding> {
        let format = format_of(table.dtype())?;
        let (vocabulary, hidden_size) = match *table.shape().dims() {
            [vocabulary, hidden_size] => (vocabulary, hidden_size),
            ref dims => {
                return Err(msg(format!(
                    "{NAME}: the table must be [vocabulary, hidden_size], not shape {dims:?}"
                )));
            }
        };
        let device = table.device();
        if !device.is_cpu() {
            return Err(msg(format!(
                "{NAME}: the table must be on the CPU, not {:?}",
                device.location()
            )));
        }
        let actual = table.data()?.len();
        QuantizedEmbedding::with_blocks(Blocks::Candle(table), format, vocabulary, hidden_size)
            .and_then(|embedding| embedding.check_bytes(actual))
    }

    /// The embedding of a table given as GGUF stores it: `vocabulary` rows of `hidden_size`
    /// values (a multiple of 32), each row `hidden_size / 32` blocks of `dtype` (an `f16`
    /// scale, little-endian, then the quants), rows one after the other.
    ///
    /// # Errors
    /// A dtype other than `Q4_0` or `Q8_0`, a `hidden_size` not a multiple of 32, `bytes` of
    /// another length than the table's.
    pub fn from_gguf_bytes(
        dtype: GgmlDType,
        vocabulary: usize,
        hidden_size: usize,
        bytes: Vec<u8>,
    ) -> candle_core::Result<QuantizedEmbedding> {
        let format = format_of(dtype)?;
        let actual = bytes.len();
        QuantizedEmbedding::with_blocks(Blocks::Bytes(bytes), format, vocabulary, hidden_size)
            .and_then(|embedding| embedding.check_bytes(actual))
    }

    /// The embedding of the tensor `name` of a GGUF file (as `Content::tensor` would load it,
    /// but its blocks are read straight into this embedding: no `QTensor` in between).
    ///
    /// # Errors
    /// No such tensor, a dtype other than `Q4_0` or `Q8_0`, a shape not 2-D, a file that ends
    /// before the tensor does, or an I/O error.
    pub fn from_gguf<R: Read + Seek>(
        content: &Content,
        reader: &mut R,
        name: &str,
    ) -> candle_core::Result<QuantizedEmbedding> {
        let info = content
            .tensor_infos
            .get(name)
            .ok_or_else(|| msg(format!("{NAME}: the GGUF file has no tensor {name:?}")))?;
        let format = format_of(info.ggml_dtype)?;
        let (vocabulary, hidden_size) = match *info.shape.dims() {
            [vocabulary, hidden_size] => (vocabulary, hidden_size),
            ref dims => {
                return Err(msg(format!(
                    "{NAME}: tensor {name:?} must be [vocabulary, hidden_size], not shape {dims:?}"
                )));
            }
        };
        let embedding = QuantizedEmbedding::with_blocks(
            Blocks::Bytes(Vec::new()),
            format,
            vocabulary,
            hidden_size,
        )?;
        let bytes = embedding.table_bytes;
        let start = content
            .tensor_data_offset
            .checked_add(info.offset)
            .ok_or_else(|| msg(format!("{NAME}: tensor {name:?}'s offset overflows")))?;
        let mut blocks: Vec<u8> = Vec::new();
        blocks
            .try_reserve_exact(bytes)
            .map_err(|_| allocation("the table's blocks", bytes))?;
        reader.seek(SeekFrom::Start(start))?;
        reader.take(bytes as u64).read_to_end(&mut blocks)?;
        if blocks.len() != bytes {
            return Err(msg(format!(
                "{NAME}: tensor {name:?} needs {bytes} bytes at offset {start}, the file has {}",
                blocks.len()
            )));
        }
        Ok(QuantizedEmbedding {
            blocks: Arc::new(Blocks::Bytes(blocks)),
            ..embedding
        })
    }

    /// Checks the table's shape (gather-jit's validation of the GGUF signature) and sizes it.
    fn with_blocks(
        blocks: Blocks,
        format: GgufFormat,
        vocabulary: usize,
        hidden_size: usize,
    ) -> candle_core::Result<QuantizedEmbedding> {
        let layout = gather_jit::QuantizedSignature::gguf(format, vocabulary, hidden_size, &[1])
            .validate()
            .map_err(from_jit)?;
        // gather-jit's size of the blocks, checked against `isize::MAX` by its validation.
        let table_bytes = layout.data_bytes();
        Ok(QuantizedEmbedding {
            blocks: Arc::new(blocks),
            format,
            vocabulary,
            hidden_size,
            table_bytes,
        })
    }

    fn check_bytes(self, actual: usize) -> candle_core::Result<QuantizedEmbedding> {
        if actual != self.table_bytes {
            return Err(msg(format!(
                "{NAME}: a {} table of {} x {} is {} bytes, got {actual}",
                self.format.name(),
                self.vocabulary,
                self.hidden_size,
                self.table_bytes
            )));
        }
        Ok(self)
    }

    /// The table's GGUF format.
    pub fn format(&self) -> GgufFormat {
        self.format
    }

    /// The table's dtype as candle names it.
    pub fn dtype(&self) -> GgmlDType {
        match self.format {
            GgufFormat::Q4_0 => GgmlDType::Q4_0,
            GgufFormat::Q8_0 => GgmlDType::Q8_0,
        }
    }

    /// Rows in the table.
    pub fn vocabulary(&self) -> usize {
        self.vocabulary
    }

    /// The width of a row.
    pub fn hidden_size(&self) -> usize {
        self.hidden_size
    }

    /// Bytes of the table's blocks (what the embedding keeps; `4 * vocabulary * hidden_size`
    /// once dequantized).
    pub fn storage_size_in_bytes(&self) -> usize {
        self.table_bytes
    }

    /// The rows of the C-contiguous `ids` (of shape `dims`) into a new `f32` buffer.
    fn gather(
        &self,
        table: &[u8],
        ids: &[u8],
        dims: &[usize],
        index_type: IndexType,
    ) -> candle_core::Result<Vec<f32>> {
        if !INDEX_TYPES.contains(&index_type) {
            return Err(msg(format!("{NAME}: no kernels for {index_type:?} ids")));
        }
        if table.len() != self.table_bytes {
            return Err(crate::error::buffer_mismatch(
                "table",
                self.table_bytes,
                table.len(),
            ));
        }
        // Checked: `dims` is the caller's shape, whose element count candle's `elem_count`
        // wraps (`contiguous` refused such ids already; this keeps the pointer arithmetic
        // below sound whoever calls).
        let id_bytes = index_type.size();
        let Some(expected) = element_count(dims).and_then(|count| count.checked_mul(id_bytes))
        else {
            return Err(msg(format!(
                "{NAME}: ids of shape {dims:?} have more elements or bytes than fit in memory"
            )));
        };
        if ids.len() != expected {
            return Err(crate::error::buffer_mismatch("ids", expected, ids.len()));
        }
        let count = expected / id_bytes;
        let values = count
            .checked_mul(self.hidden_size)
            .filter(|&v| v <= isize::MAX as usize / 4)
            .ok_or_else(|| {
                msg(format!(
                    "{NAME}: {count} rows of {} values do not fit in memory",
                    self.hidden_size
                ))
            })?;
        let mut output: Vec<f32> = Vec::new();
        output
            .try_reserve_exact(values)
            .map_err(|_| allocation("the output", values * 4))?;
        // The ids in runs of 2^k, largest first, each at its offset in the ids and output; one
        // signature, its id count rewritten for each run.
        let mut signature =
            QuantizedSignature::gguf(self.format, self.vocabulary, self.hidden_size, &[1])
                .with_dtype(DType::F32)
                .with_index_type(index_type);
        let mut done = 0usize;
        for log2 in (0..usize::BITS as usize).rev() {
            let run = 1usize << log2;
            if count & run == 0 {
                continue;
            }
            signature.indices_shape[0] = run;
            // Within `ids`: the runs sum to `count`, whose ids are `ids.len()` bytes.
            let ids_run = &ids[done * id_bytes..(done + run) * id_bytes];
            let out = output.as_mut_ptr();
            let called = KernelCache::global()
                .with_quantized(&signature, |kernel| {
                    // SAFETY: `table` is the table's whole blocks (checked above against the size that
                    // gather-jit's layout gives this signature), `ids_run` holds the kernel's `run`
                    // ids, the output's capacity holds `count * hidden_size` values of which this run
                    // writes `run * hidden_size` from `done * hidden_size`, within it; the output is
                    // new so overlaps neither input and no other thread sees it; GGUF kernels read
                    // no scales or zero points. A long prompt's rows split across the worker
                    // pool (0: the kernel chooses, by output size).
                    unsafe {
                        kernel.call_parallel(
                            table.as_ptr(),
                            ids_run.as_ptr(),
                            std::ptr::null(),
                            std::ptr::null(),
                            out.add(done * self.hidden_size).cast(),
                            0,
                        )
                    }
                })
                .map_err(from_jit)?;
            match called {
                Ok(()) => {}
                // The kernel names the position in its run: the error names it in `ids`.
                Err(gather_jit::Error::IndexOutOfRange {
                    position, value, ..
                }) => {
                    let flat = done + position.first().copied().unwrap_or(0);
                    return Err(index_out_of_range(
                        OpName::GatherGguf,
                        &unravel(flat, dims),
                        value,
                        0,
                        self.vocabulary,
                    ));
                }
                Err(error) => return Err(from_jit(error)),
            }
            done += run;
        }
        // SAFETY: the runs cover all `count` ids and each successful call wrote its rows'
        // `run * hidden_size` values, so all `values` are initialised floats.
        unsafe { output.set_len(values) };
        Ok(output)
    }
}

impl CustomOp1 for QuantizedEmbedding {
    fn name(&self) -> &'static str {
        NAME
    }

    fn cpu_fwd(
        &self,
        ids: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (ids, index_type) = match ids {
            CpuStorage::U8(ids) => (contiguous(ids, layout, "ids")?, IndexType::U8),
            CpuStorage::U32(ids) => (contiguous(ids, layout, "ids")?, IndexType::U32),
            CpuStorage::I16(ids) => (contiguous(ids, layout, "ids")?, IndexType::I16),
            CpuStorage::I32(ids) => (contiguous(ids, layout, "ids")?, IndexType::I32),
            CpuStorage::I64(ids) => (contiguous(ids, layout, "ids")?, IndexType::I64),
            other => {
                return Err(msg(format!(
                    "{NAME}: ids must be u8, u32, i16, i32 or i64, not {:?}",
                    other.dtype()
                )));
            }
        };
        let rows = match &*self.blocks {
            Blocks::Candle(table) => {
                self.gather(&table.data()?, &ids, layout.dims(), index_type)?
            }
            Blocks::Bytes(table) => self.gather(table, &ids, layout.dims(), index_type)?,
        };
        let shape = quantized_output_shape(
            Quantization::Gguf(self.format),
            &[self.vocabulary, self.hidden_size],
            layout.dims(),
        )
        .map_err(from_jit)?;
        Ok((CpuStorage::F32(rows), Shape::from(shape)))
    }
}

impl Module for QuantizedEmbedding {
    /// The rows of `ids` (any shape and layout, on the CPU): `f32` of shape
    /// `ids.dims() + [hidden_size]`.
    fn forward(&self, ids: &Tensor) -> candle_core::Result<Tensor> {
        if !ids.device().is_cpu() {
            return Err(msg(format!(
                "{NAME}: the ids must be on the CPU (the table is), not {:?}",
                ids.device().location()
            )));
        }
        ids.apply_op1_no_bwd(self)
    }
}

/// The gather-jit format of a candle dtype, or the error naming the accepted ones.
fn format_of(dtype: GgmlDType) -> candle_core::Result<GgufFormat> {
    match dtype {
        GgmlDType::Q4_0 => Ok(GgufFormat::Q4_0),
        GgmlDType::Q8_0 => Ok(GgufFormat::Q8_0),
        other => Err(msg(format!(
            "{NAME}: the table must be GgmlDType::Q4_0 or GgmlDType::Q8_0, not {other:?}"
        ))),
    }
}
