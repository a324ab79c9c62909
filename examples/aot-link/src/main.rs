//! Runs every kernel that `build.rs` compiled into the program, on random inputs, and checks
//! each output against gather-jit's interpreter.
//!
//! ```text
//! cargo run --profile checked -p gather-jit-aot-link
//! ```

use std::process::ExitCode;

use gather_jit_aot_link::{CPU, KERNELS, TARGET, check_against_interpreter};

fn main() -> ExitCode {
    println!("kernels compiled ahead of time for {TARGET} ({CPU} CPU features)");
    let mut failed = false;
    for kernel in &KERNELS {
        match check_against_interpreter(kernel, 1) {
            Ok(bytes) => println!(
                "{:16} {bytes:9} output bytes, as the interpreter's",
                kernel.symbol
            ),
            Err(e) => {
                eprintln!("error: {e}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
