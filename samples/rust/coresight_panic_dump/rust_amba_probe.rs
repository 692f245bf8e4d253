// SPDX-License-Identifier: GPL-2.0

//! Rust AMBA bus sample.
//!
//! Binds through `kernel::amba` to an ARM PL031 real-time clock (the QEMU `virt` machine has one)
//! and reads its peripheral and component ID registers over MMIO, checking them against what the
//! bus read when it matched the device. The CoreSight drivers use the same bus abstraction.

use kernel::{
    amba,
    device::Core,
    io::Io,
    prelude::*, //
};

/// Offset of PeriphID0; PeriphID1-3 follow, one byte in each 32-bit register.
const PERIPHID0: usize = 0xFE0;

/// Offset of ComponentID0; ComponentID1-3 follow.
const COMPONENTID0: usize = 0xFF0;

/// Size of the register frame of a PrimeCell.
const FRAME: usize = 0x1000;

/// PL031 peripheral ID, as the bus matches it (revision bits masked).
const PL031_ID: u32 = 0x0004_1031;

struct AmbaProbe;

kernel::amba_device_table!(AMBA_TABLE, [amba::DeviceId::new(PL031_ID, 0x000f_ffff)]);

/// Assembles a 32-bit ID from the low bytes of four consecutive registers at `base`.
fn read_id(io: &kernel::io::mem::IoMem<'_, FRAME>, base: usize) -> Result<u32> {
    let mut id = 0u32;
    for i in 0..4 {
        id |= (io.try_read32(base + 4 * i)? & 0xff) << (8 * i);
    }
    Ok(id)
}

impl amba::Driver for AmbaProbe {
    type Data<'bound> = Self;
    const ID_TABLE: amba::IdTable = &AMBA_TABLE;

    fn probe<'bound>(
        adev: &'bound amba::Device<Core<'_>>,
        id: &'bound amba::DeviceId,
    ) -> impl PinInit<Self, Error> + 'bound {
        let iomem = adev.io_request().iomap_sized::<FRAME>()?;
        let periphid = read_id(&iomem, PERIPHID0)?;
        let cid = read_id(&iomem, COMPONENTID0)?;
        dev_info!(
            adev,
            "periphid {:#010x} read over MMIO (bus: {:#010x}), cid {:#010x}, matched {:#x}/{:#x}\n",
            periphid,
            adev.periphid(),
            cid,
            id.id(),
            id.mask()
        );
        if periphid != adev.periphid() || cid != adev.cid() {
            dev_err!(adev, "MMIO ID registers differ from what the bus read\n");
            return Err(EIO);
        }
        Ok(AmbaProbe)
    }
}

kernel::module_amba_driver! {
    type: AmbaProbe,
    name: "rust_amba_probe",
    authors: ["coresight-panic-dump developers"],
    description: "Rust AMBA bus sample",
    license: "GPL",
}
