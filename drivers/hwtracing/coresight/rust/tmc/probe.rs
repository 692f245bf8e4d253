// SPDX-License-Identifier: GPL-2.0

//! Binding: the AMBA driver that probes each TMC in the configuration its `DEVID` says (an ETB
//! or ETF: [`crate::driver`]; an ETR: [`crate::etr_driver`]), and the module that registers it.

use kernel::{
    amba, c_str,
    coresight::{
        access::{
            CsAccess,
            FRAME, //
        },
        component::Backend,
        devfile::DevFileRegistration, //
    },
    device::{
        Core,
        Device, //
    },
    driver,
    io::mem::IoMem,
    prelude::*,
};

use crate::{
    driver::{
        probe_tmc,
        tmc_file,
        TmcDevice,
        TmcFile, //
    },
    etr_driver::{
        etr_file,
        probe_etr,
        EtrDevice,
        EtrFile, //
    },
    regs::{
        TmcConfigType,
        DEVID, //
    },
};

/// Name the C driver has.
const DRIVER_NAME: &CStr = c_str!("coresight-tmc");

/// The AMBA driver for real TMCs.
struct TmcAmba;

kernel::amba_device_table!(
    AMBA_TABLE,
    [
        // CoreSight SoC-400 TMC (ETB, ETF or ETR, as DEVID says), SoC-600 TMC-ETR/ETS, TMC-ETB
        // and TMC-ETF.
        amba::DeviceId::new(0x000b_b961, 0x000f_ffff),
        amba::DeviceId::new(0x000b_b9e8, 0x000f_ffff),
        amba::DeviceId::new(0x000b_b9e9, 0x000f_ffff),
        amba::DeviceId::new(0x000b_b9ea, 0x000f_ffff),
    ]
);

/// A bound TMC: a buffer (ETB, ETF) or a router to memory (ETR), registered until unbound.
pub(crate) struct TmcData<'bound> {
    /// An ETB's or ETF's device file, removed first.
    _file: Option<Pin<KBox<DevFileRegistration<TmcFile<IoMem<'bound, FRAME>>>>>>,
    /// An ETR's device file, removed first.
    _etr_file: Option<Pin<KBox<DevFileRegistration<EtrFile<'bound, IoMem<'bound, FRAME>>>>>>,
    /// An ETB or ETF.
    _buffer: Option<Pin<KBox<TmcDevice<IoMem<'bound, FRAME>>>>>,
    /// An ETR.
    _router: Option<Pin<KBox<EtrDevice<'bound, IoMem<'bound, FRAME>>>>>,
}

impl amba::Driver for TmcAmba {
    type Data<'bound> = TmcData<'bound>;
    const ID_TABLE: amba::IdTable = &AMBA_TABLE;

    fn probe<'bound>(
        adev: &'bound amba::Device<Core<'_>>,
        _id: &'bound amba::DeviceId,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        let dev: &Device<Core<'_>> = adev.as_ref();
        let mut iomem = adev.io_request().iomap_sized::<FRAME>()?;
        // Probe owns the registers until a registration puts them behind its lock.
        let devid: DEVID = iomem.with_io(|io| io.read(DEVID))?;
        Ok(if devid.configtype() == TmcConfigType::Etr {
            let (router, etr) = probe_etr(adev, iomem, devid)?;
            let router = KBox::pin_init(router, GFP_KERNEL)?;
            TmcData {
                _file: None,
                _etr_file: Some(KBox::pin_init(etr_file(etr)?, GFP_KERNEL)?),
                _buffer: None,
                _router: Some(router),
            }
        } else {
            let (buffer, tmc) = probe_tmc(dev, iomem, devid)?;
            let buffer = KBox::pin_init(buffer, GFP_KERNEL)?;
            TmcData {
                _file: Some(KBox::pin_init(tmc_file(tmc)?, GFP_KERNEL)?),
                _etr_file: None,
                _buffer: Some(buffer),
                _router: None,
            }
        })
    }
}

/// The module: the AMBA driver's registration.
pub(crate) struct TmcModule {
    _amba: Pin<KBox<driver::Registration<amba::Adapter<TmcAmba>>>>,
}

impl kernel::Module for TmcModule {
    fn init(module: &'static ThisModule) -> Result<Self> {
        Ok(Self {
            _amba: KBox::pin_init(driver::Registration::new(DRIVER_NAME, module), GFP_KERNEL)?,
        })
    }
}
