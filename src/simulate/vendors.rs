//! Each vendor through the engine: its fixtures (from `hami_core`) placed by filter and bind over
//! an in-memory cluster, as `hami-rs simulate` places them.

mod amd;
mod ascend;
mod awsneuron;
mod biren;
mod cambricon;
mod enflame;
mod enflame_drs;
mod hygon;
mod iluvatar;
mod kunlun;
mod kunlun_vxpu;
mod metax;
mod metax_sgpu;
mod mthreads;
mod vastai;
