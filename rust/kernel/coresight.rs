// SPDX-License-Identifier: GPL-2.0

//! CoreSight: Arm's debug and trace components.
//!
//! A driver describes its component with a [`Desc`], implements the operations of its kind
//! ([`Operations`]: sink, link or source callbacks, and the trace ID) and registers it with
//! [`Registration`]. The C CoreSight core then lists the component under
//! `/sys/bus/coresight/devices/`, gives sinks an `enable_sink` and sources an `enable_source`
//! attribute, and builds trace paths through the connections that the firmware (the device tree
//! graph) describes, including C funnels and replicators.
//!
//! A component can add its own sysfs attributes to that directory, or to named subdirectories of
//! it ([`Operations::ATTRIBUTE_GROUPS`], [`Operations::show`], [`Operations::store`]), as the C
//! drivers add `buffer_size` or `stop_on_flush`, or an ETM's `trcidr/` and `mgmt/` registers.
//!
//! A sink that implements the buffer operations ([`Operations::alloc_buffer`],
//! [`Operations::sink_enable_perf`], [`Operations::update_buffer`]) and a per-CPU source that
//! implements [`Operations::source_enable_perf`] work with perf's `cs_etm` PMU ([`perf`]); such a
//! source is linked from the PMU as `cs_etm/cpuN` while it is registered.
//!
//! The core calls sysfs operations with its `coresight_mutex` held; perf calls link operations
//! without it, in atomic context. Dropping a [`Registration`] disables a source that is still
//! enabled through sysfs and then unregisters the component. A sink or link that is still on an
//! enabled path when its device is unbound is not torn down (the C drivers share this).
//!
//! C header: [`include/linux/coresight.h`](srctree/include/linux/coresight.h)

use crate::{
    container_of,
    device::{
        Bound,
        Device, //
    },
    error::{
        from_err_ptr,
        from_result,
        to_result,
        VTABLE_DEFAULT_ERROR, //
    },
    prelude::*,
    str::{
        CStrExt,
        CString, //
    },
    types::Opaque, //
};

use core::{
    marker::{
        PhantomData,
        PhantomPinned, //
    },
    ptr::NonNull, //
};

// `register!` documents each register and field, not the mask, shift and range constants it
// generates for them.
#[expect(missing_docs)]
pub mod access;
pub mod component;
pub mod devfile;
pub mod panic_dump;
pub mod perf;
pub mod self_hosted;

/// Returns the CPU a CoreSight component belongs to, from its firmware description (the `cpu`
/// phandle in the device tree).
///
/// Returns [`ENODEV`] when the component is not tied to a CPU.
pub fn get_cpu(dev: &Device) -> Result<u32> {
    // SAFETY: `dev.as_raw()` is a valid `struct device` for the duration of the call.
    let cpu = unsafe { bindings::coresight_get_cpu(dev.as_raw()) };
    u32::try_from(cpu).map_err(|_| ENODEV)
}

/// Returns the hardware ID of the CPU a CoreSight component belongs to (on arm64 the affinity
/// fields of its `MPIDR_EL1`), from its firmware description: the `reg` of the device tree node
/// its `cpu` phandle names.
///
/// Unlike [`get_cpu`] this does not need the CPU to be possible in this kernel: a kdump capture
/// kernel numbers CPUs its own way and usually brings up one, and the hardware ID is how it names
/// the crashed kernel's CPUs. Returns [`ENODEV`] when the component is not tied to a CPU in the
/// device tree (ACPI descriptions are not read).
pub fn get_cpu_hwid(dev: &Device) -> Result<u64> {
    // SAFETY: `dev.as_raw()` is a valid `struct device` for the duration of the call.
    let hwid = unsafe { bindings::cspd_cpu_hwid(dev.as_raw()) };
    if hwid == u64::MAX {
        return Err(ENODEV);
    }
    Ok(hwid)
}

/// Returns whether logical CPU `cpu` is online now (`cpu_online()`); false for a number beyond
/// the possible CPUs.
pub fn cpu_online(cpu: u32) -> bool {
    // SAFETY: The helper checks `cpu` against `nr_cpu_ids` before it reads the online mask.
    unsafe { bindings::cspd_cpu_online(cpu) }
}

/// Probes `dev` again with the drivers of its bus (`device_attach()`): for a component whose probe
/// could not finish earlier (its CPU was offline). Returns whether a driver is bound to it now.
///
/// Process context; not with the device's lock held.
pub fn probe_again(dev: &Device) -> Result<bool> {
    // SAFETY: `dev` is a valid device, referenced for the call.
    let ret = unsafe { bindings::device_attach(dev.as_raw()) };
    to_result(ret)?;
    Ok(ret > 0)
}

/// Returns whether the kernel runs at EL2 (arm64 with VHE): a trace unit's address comparators
/// must then match Non-secure EL2, where the kernel's code runs, instead of excluding it.
pub fn kernel_at_el2() -> bool {
    // SAFETY: The helper reads a boot-time CPU state and has no requirement.
    unsafe { bindings::cspd_kernel_in_hyp_mode() }
}

/// Returns the CoreSight bus name for the next component of `dev` with `prefix`, such as
/// `tmc_etf0` (`coresight_alloc_device_name()`): the same device gets the same index again
/// when it is bound again.
pub fn alloc_device_name(prefix: &CStr, dev: &Device<Bound>) -> Result<CString> {
    // SAFETY: `prefix` is a valid C string (the core copies it); `dev` is bound, and the name
    // is allocated with devm on it.
    let name = unsafe { bindings::coresight_alloc_device_name(prefix.as_char_ptr(), dev.as_raw()) };
    if name.is_null() {
        return Err(ENOMEM);
    }
    // SAFETY: `name` is a NUL-terminated string that lives while `dev` is bound.
    let name = unsafe { CStr::from_char_ptr(name) };
    Ok(CString::try_from(name)?)
}

/// Who is using a component (`enum cs_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Not in use.
    Disabled,
    /// Enabled through sysfs (`enable_sink`, `enable_source`).
    Sysfs,
    /// Enabled by a perf session.
    Perf,
}

impl Mode {
    fn from_raw(raw: bindings::cs_mode) -> Option<Self> {
        match raw {
            bindings::cs_mode_CS_MODE_DISABLED => Some(Self::Disabled),
            bindings::cs_mode_CS_MODE_SYSFS => Some(Self::Sysfs),
            bindings::cs_mode_CS_MODE_PERF => Some(Self::Perf),
            _ => None,
        }
    }

    fn to_raw(self) -> bindings::cs_mode {
        match self {
            Self::Disabled => bindings::cs_mode_CS_MODE_DISABLED,
            Self::Sysfs => bindings::cs_mode_CS_MODE_SYSFS,
            Self::Perf => bindings::cs_mode_CS_MODE_PERF,
        }
    }
}

/// What kind of sink a component is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SinkKind {
    /// An output port to an off-chip trace port.
    Port,
    /// An on-chip buffer (ETB, ETF).
    Buffer,
    /// A router to system memory (ETR).
    SysMem,
}

/// What kind of link a component is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkKind {
    /// Many inputs to one output (funnel).
    Merge,
    /// One input to many outputs (replicator).
    Split,
    /// A FIFO (ETF in hardware FIFO mode).
    Fifo,
}

/// What kind of source a component is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// A processor's trace unit (ETM), tied to one CPU.
    Proc,
    /// A bus trace source.
    Bus,
    /// A software source (STM).
    Software,
}

/// The type of a component and its subtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A sink: the end of a trace path.
    Sink(SinkKind),
    /// A link between components.
    Link(LinkKind),
    /// A component that is a link or a sink depending on its mode (TMC-ETF).
    LinkSink(LinkKind, SinkKind),
    /// A trace source.
    Source(SourceKind),
}

impl Kind {
    fn raw(
        self,
    ) -> (
        bindings::coresight_dev_type,
        bindings::coresight_dev_subtype,
    ) {
        // SAFETY: The C union of subtypes is plain integers; all-zero is valid.
        let mut sub: bindings::coresight_dev_subtype = unsafe { core::mem::zeroed() };
        let sink = |k: SinkKind| match k {
            SinkKind::Port => bindings::coresight_dev_subtype_sink_CORESIGHT_DEV_SUBTYPE_SINK_PORT,
            SinkKind::Buffer => {
                bindings::coresight_dev_subtype_sink_CORESIGHT_DEV_SUBTYPE_SINK_BUFFER
            }
            SinkKind::SysMem => {
                bindings::coresight_dev_subtype_sink_CORESIGHT_DEV_SUBTYPE_SINK_SYSMEM
            }
        };
        let link = |k: LinkKind| match k {
            LinkKind::Merge => bindings::coresight_dev_subtype_link_CORESIGHT_DEV_SUBTYPE_LINK_MERG,
            LinkKind::Split => {
                bindings::coresight_dev_subtype_link_CORESIGHT_DEV_SUBTYPE_LINK_SPLIT
            }
            LinkKind::Fifo => bindings::coresight_dev_subtype_link_CORESIGHT_DEV_SUBTYPE_LINK_FIFO,
        };
        let ty = match self {
            Self::Sink(k) => {
                sub.__bindgen_anon_1.sink_subtype = sink(k);
                bindings::coresight_dev_type_CORESIGHT_DEV_TYPE_SINK
            }
            Self::Link(k) => {
                sub.__bindgen_anon_1.link_subtype = link(k);
                bindings::coresight_dev_type_CORESIGHT_DEV_TYPE_LINK
            }
            Self::LinkSink(l, s) => {
                sub.__bindgen_anon_1.link_subtype = link(l);
                sub.__bindgen_anon_1.sink_subtype = sink(s);
                bindings::coresight_dev_type_CORESIGHT_DEV_TYPE_LINKSINK
            }
            Self::Source(k) => {
                sub.source_subtype = match k {
                    SourceKind::Proc => {
                        bindings::coresight_dev_subtype_source_CORESIGHT_DEV_SUBTYPE_SOURCE_PROC
                    }
                    SourceKind::Bus => {
                        bindings::coresight_dev_subtype_source_CORESIGHT_DEV_SUBTYPE_SOURCE_BUS
                    }
                    SourceKind::Software => {
                        bindings::coresight_dev_subtype_source_CORESIGHT_DEV_SUBTYPE_SOURCE_SOFTWARE
                    }
                };
                bindings::coresight_dev_type_CORESIGHT_DEV_TYPE_SOURCE
            }
        };
        (ty, sub)
    }
}

/// A registered CoreSight component (`struct coresight_device`), as the operations see it.
///
/// # Invariants
///
/// The wrapped `struct coresight_device` is registered with the CoreSight core.
#[repr(transparent)]
pub struct CsDevice(Opaque<bindings::coresight_device>);

impl CsDevice {
    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` points to a registered `struct coresight_device` that stays registered for `'a`.
    unsafe fn from_raw<'a>(ptr: *mut bindings::coresight_device) -> &'a Self {
        // SAFETY: `CsDevice` is a transparent wrapper of the C struct; the caller guarantees
        // validity for `'a`.
        unsafe { &*ptr.cast() }
    }

    fn as_raw(&self) -> *mut bindings::coresight_device {
        self.0.get()
    }

    /// Returns the component's device on the CoreSight bus (`/sys/bus/coresight/devices/<name>`).
    pub fn as_device(&self) -> &Device {
        // SAFETY: By the type invariant the component is registered, so its embedded
        // `struct device` is valid for as long as `self`.
        unsafe { Device::from_raw(&raw mut (*self.as_raw()).dev) }
    }

    /// Returns the current mode (`coresight_get_mode()`).
    pub fn mode(&self) -> Mode {
        // SAFETY: By the type invariant `self` is a valid component.
        let raw = unsafe { bindings::coresight_get_mode(self.as_raw()) };
        Mode::from_raw(raw).unwrap_or(Mode::Disabled)
    }

    /// Takes the component for `mode` if it is not in use (`coresight_take_mode()`); returns
    /// whether it was taken.
    pub fn take_mode(&self, mode: Mode) -> bool {
        // SAFETY: By the type invariant `self` is a valid component.
        unsafe { bindings::coresight_take_mode(self.as_raw(), mode.to_raw()) }
    }

    /// Sets the mode (`coresight_set_mode()`): to [`Mode::Disabled`] when done, or to the mode
    /// it already has.
    pub fn set_mode(&self, mode: Mode) {
        // SAFETY: By the type invariant `self` is a valid component.
        unsafe { bindings::coresight_set_mode(self.as_raw(), mode.to_raw()) }
    }

    /// Returns the CPU the component is tied to, if any.
    pub fn cpu(&self) -> Option<u32> {
        // SAFETY: By the type invariant `self` is valid; `cpu` is set at registration and not
        // changed afterwards.
        let cpu = unsafe { (*self.as_raw()).cpu };
        u32::try_from(cpu).ok()
    }

    /// Returns the trace ID the core allocates for this CPU-bound source (the C helper
    /// `coresight_etm_get_trace_id()`): one ID per CPU in sysfs mode, one per sink's ID map in
    /// perf mode.
    pub fn etm_trace_id(&self, mode: Mode, sink: Option<&CsDevice>) -> Result<u8> {
        let sink = sink.map_or(core::ptr::null_mut(), |s| s.as_raw());
        // SAFETY: `self` is a valid component, `sink` is null or a valid component.
        let id =
            unsafe { bindings::coresight_etm_get_trace_id(self.as_raw(), mode.to_raw(), sink) };
        to_result(id)?;
        u8::try_from(id).map_err(|_| EINVAL)
    }
}

/// The path from a source to a sink that the core built (`struct coresight_path`).
#[repr(transparent)]
pub struct Path(Opaque<bindings::coresight_path>);

impl Path {
    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` points to a valid `struct coresight_path` for `'a`.
    unsafe fn from_raw<'a>(ptr: *mut bindings::coresight_path) -> &'a Self {
        // SAFETY: Transparent wrapper; validity guaranteed by the caller.
        unsafe { &*ptr.cast() }
    }

    /// Returns the trace ID assigned to the path's source.
    pub fn trace_id(&self) -> u8 {
        // SAFETY: By the requirements of `from_raw` the path is valid.
        unsafe { (*self.0.get()).trace_id }
    }

    /// Returns the AUX transaction the path was enabled for, in perf mode.
    pub fn aux_handle(&self) -> Option<&perf::AuxHandle> {
        // SAFETY: By the requirements of `from_raw` the path is valid.
        let handle = unsafe { bindings::cspd_path_handle(self.0.get()) };
        // SAFETY: The core sets the handle of a perf path to the transaction it began on this
        // CPU before it enables the path, and keeps it open while the path's operations run.
        (!handle.is_null()).then(|| unsafe { perf::AuxHandle::from_raw(handle) })
    }
}

/// A connection between two ports (`struct coresight_connection`), as link operations see it.
#[repr(transparent)]
pub struct Connection(Opaque<bindings::coresight_connection>);

impl Connection {
    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` points to a valid `struct coresight_connection` for `'a`.
    unsafe fn from_raw<'a>(ptr: *mut bindings::coresight_connection) -> &'a Self {
        // SAFETY: Transparent wrapper; validity guaranteed by the caller.
        unsafe { &*ptr.cast() }
    }

    /// Returns the output port of the connection's source side.
    pub fn src_port(&self) -> i32 {
        // SAFETY: The connection is valid (see `from_raw`).
        unsafe { (*self.0.get()).src_port }
    }

    /// Returns the input port of the connection's destination side.
    pub fn dest_port(&self) -> i32 {
        // SAFETY: The connection is valid (see `from_raw`).
        unsafe { (*self.0.get()).dest_port }
    }
}

/// Most sysfs attributes a component adds, in all its groups ([`Operations::ATTRIBUTE_GROUPS`]).
pub const MAX_ATTRIBUTES: usize = 64;

/// Most attribute groups a component adds.
pub const MAX_ATTRIBUTE_GROUPS: usize = 4;

/// A group of a component's sysfs attributes: files in its directory, or in a subdirectory of it
/// (`mgmt/`, `trcidr/`).
#[derive(Clone, Copy, Debug)]
pub struct AttributeGroup {
    /// The subdirectory, or `None` for the component's directory.
    pub name: Option<&'static CStr>,
    /// The attributes.
    pub attributes: &'static [Attribute],
}

/// A sysfs attribute of a component: a file in its directory on the CoreSight bus
/// (`/sys/bus/coresight/devices/<name>/`), next to the core's `enable_sink` or `enable_source`.
#[derive(Clone, Copy, Debug)]
pub struct Attribute {
    /// The file's name.
    pub name: &'static CStr,
    /// Who may read and write it.
    pub mode: AttributeMode,
}

/// Who may read and write an [`Attribute`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttributeMode {
    /// Anyone reads it (mode 0444).
    ReadOnly,
    /// Anyone reads it, root writes it (mode 0644).
    ReadWrite,
    /// Root writes it, nobody reads it (mode 0200: a command such as `reset`).
    WriteOnly,
}

/// What an attribute's `show` writes into: the page sysfs gives it, filled as text with
/// [`core::fmt::Write`] (`writeln!(out, "{:#x}", size)`). What does not fit in the page is cut
/// off.
pub struct AttributeBuf<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl AttributeBuf<'_> {
    /// Returns the bytes written so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Returns whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl core::fmt::Write for AttributeBuf<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let room = self.buf.len().saturating_sub(self.len);
        let n = s.len().min(room);
        if let Some(dst) = self.buf.get_mut(self.len..self.len + n) {
            dst.copy_from_slice(&s.as_bytes()[..n]);
        }
        self.len += n;
        if n < s.len() {
            Err(core::fmt::Error)
        } else {
            Ok(())
        }
    }
}

/// The operations of a component, called by the CoreSight core.
///
/// Implement the ones the component's [`Kind`] needs: `sink_enable`/`sink_disable` for sinks,
/// `link_enable`/`link_disable` for links, `source_enable`/`source_disable` for sources, and
/// `trace_id` for sources that take an ID from the core; and `show` (and `store`, for writable
/// ones) when the component has [`Operations::ATTRIBUTE_GROUPS`]. perf mode needs the buffer
/// operations of a sink and `source_enable_perf` of a source.
#[vtable]
pub trait Operations: Send + Sync {
    /// What a sink keeps per perf session in its [`perf::AuxBuffer`] (`()` for other components
    /// and sinks without perf mode).
    type PerfBuffer: Send + Sync;

    /// The component's own sysfs attributes, at most [`MAX_ATTRIBUTE_GROUPS`] groups of
    /// [`MAX_ATTRIBUTES`] attributes in all. Each is read through [`Operations::show`] and, when
    /// writable, written through [`Operations::store`], with its index in the list of all the
    /// groups' attributes one after the other.
    const ATTRIBUTE_GROUPS: &'static [AttributeGroup] = &[];

    /// Writes the value of attribute `index` of [`Operations::ATTRIBUTE_GROUPS`] into `out`, as
    /// text ending in a newline.
    fn show(&self, _csdev: &CsDevice, _index: usize, _out: &mut AttributeBuf<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Sets attribute `index` of [`Operations::ATTRIBUTE_GROUPS`] from `input`, what was written
    /// to the file (a trailing newline included). An error is returned to the writer.
    fn store(&self, _csdev: &CsDevice, _index: usize, _input: &[u8]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Returns the sink's data for a new perf session of `event`, when perf maps its AUX area
    /// (process context; may allocate). The abstraction keeps it with the AUX pages in a
    /// [`perf::AuxBuffer`] until the session ends.
    fn alloc_buffer(
        &self,
        _csdev: &CsDevice,
        _event: &perf::PerfEvent,
    ) -> Result<Self::PerfBuffer> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Enables the sink for the perf transaction `handle` on `path`, whose session's buffer is
    /// `buf` (on the event's CPU, interrupts off). A sink that another session or sysfs owns
    /// returns [`EBUSY`].
    fn sink_enable_perf(
        &self,
        _csdev: &CsDevice,
        _path: &Path,
        _handle: &perf::AuxHandle,
        _buf: &perf::AuxBuffer<Self::PerfBuffer>,
    ) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Copies the sink's trace into `buf`'s AUX pages for the transaction `handle`, when tracing
    /// stops on this CPU, and returns how many bytes it wrote (the core ends the transaction
    /// with that size). Flags the transaction ([`perf::AuxHandle::flag`]) when trace was lost; in
    /// snapshot mode advances its head instead of limiting itself to its room.
    fn update_buffer(
        &self,
        _csdev: &CsDevice,
        _handle: &perf::AuxHandle,
        _buf: &perf::AuxBuffer<Self::PerfBuffer>,
    ) -> usize {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Returns the trace ID of this source for `mode` (`trace_id` op).
    fn trace_id(&self, _csdev: &CsDevice, _mode: Mode, _sink: Option<&CsDevice>) -> Result<u8> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Enables the sink for sysfs mode on `path` (perf mode: [`Operations::sink_enable_perf`]).
    fn sink_enable(&self, _csdev: &CsDevice, _mode: Mode, _path: &Path) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Drops one user of the sink; disables it when it was the last one. Returns [`EBUSY`] when
    /// other users remain.
    fn sink_disable(&self, _csdev: &CsDevice) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Enables the flow from `inport` to `outport`.
    fn link_enable(&self, _csdev: &CsDevice, _in: &Connection, _out: &Connection) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Disables the flow from `inport` to `outport`.
    fn link_disable(&self, _csdev: &CsDevice, _in: &Connection, _out: &Connection) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Starts tracing in sysfs mode, with the trace ID of `path` (perf mode:
    /// [`Operations::source_enable_perf`]).
    ///
    /// For a per-CPU source ([`SourceKind::Proc`]) the registration records `path` in the
    /// component when this succeeds and clears it after [`Operations::source_disable`], as the
    /// core expects of such drivers.
    fn source_enable(&self, _csdev: &CsDevice, _mode: Mode, _path: &Path) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Starts tracing for the perf event `event`, with the trace ID of `path`: called on the
    /// source's own CPU with interrupts off, where no cross-CPU call may be made.
    fn source_enable_perf(
        &self,
        _csdev: &CsDevice,
        _event: &perf::PerfEvent,
        _path: &Path,
    ) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Stops tracing; `event` is the perf event it was enabled for, in perf mode (then on the
    /// source's own CPU, interrupts off).
    fn source_disable(&self, _csdev: &CsDevice, _event: Option<&perf::PerfEvent>) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Pauses a source perf enabled (perf's AUX pause, `aux-action=pause`): trace generation
    /// stops, the configuration stays for [`Operations::source_resume_perf`]. Called on the
    /// source's own CPU with interrupts off, possibly from an NMI-like context: no lock that
    /// sleeps, no cross-CPU call. A source without it cannot be used with `aux-action`.
    fn source_pause_perf(&self, _csdev: &CsDevice) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Resumes a source [`Operations::source_pause_perf`] paused, under the same rules.
    fn source_resume_perf(&self, _csdev: &CsDevice) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Stops a tracing source before its CPU enters a low-power state that may lose its context
    /// (the core's `pm_save_disable`), keeping what [`Operations::source_pm_restore`] needs to
    /// trace as before. Called by the core's CPU PM notifier on the source's CPU, interrupts
    /// off: no lock that sleeps, no cross-CPU call. An error keeps the CPU out of that state.
    /// Only for sources registered with [`Desc::pm_save`].
    fn source_pm_save(&self, _csdev: &CsDevice) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Makes the source trace again as it did before [`Operations::source_pm_save`], when its
    /// CPU left the low-power state (or did not enter it), under the same rules.
    fn source_pm_restore(&self, _csdev: &CsDevice) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}

/// How a component is described to the core.
pub struct Desc<'a> {
    /// Name on the CoreSight bus, such as `tmc_etf0` or `etm1`.
    pub name: &'a CStr,
    /// Type and subtype.
    pub kind: Kind,
    /// The CPU the component is tied to (required for [`SourceKind::Proc`]).
    pub cpu: Option<u32>,
    /// The source loses its context when its CPU powers down: the core's CPU PM notifier calls
    /// [`Operations::source_pm_save`] and [`Operations::source_pm_restore`] around the CPU's
    /// low-power states (both required).
    pub pm_save: bool,
}

/// A component registered with the CoreSight core; unregistered on drop.
///
/// The connections come from the firmware description of the parent device (its device tree
/// graph), read with `coresight_get_platform_data()`.
///
/// # Invariants
///
/// `csdev` is the component returned by `coresight_register()` for `ops`, until drop.
#[pin_data(PinnedDrop)]
pub struct Registration<T: Operations> {
    #[pin]
    ops: Opaque<bindings::coresight_ops>,
    csdev: NonNull<bindings::coresight_device>,
    /// The component is linked from the `cs_etm` PMU as `cpuN`.
    perf_linked: bool,
    data: T,
    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: The component may be unregistered from any thread; `T` is `Send`.
unsafe impl<T: Operations> Send for Registration<T> {}

// SAFETY: `&Registration` only gives out `&T` (which is `Sync`) and the component pointer.
unsafe impl<T: Operations> Sync for Registration<T> {}

impl<T: Operations> Registration<T> {
    /// Registers the component `desc` of the bound device `dev`, whose operations are `data`'s.
    pub fn new<'a>(
        dev: &'a Device<Bound>,
        desc: Desc<'a>,
        data: T,
    ) -> impl PinInit<Self, Error> + 'a
    where
        T: 'a,
    {
        let pm_save = desc.pm_save;
        try_pin_init!(&this in Self {
            ops: Opaque::new(if pm_save {
                OpsTable::<T>::OPS_PM
            } else {
                OpsTable::<T>::OPS
            }),
            // Before the registration: the core may call an operation as soon as the component
            // is registered.
            data,
            csdev: {
                // The operations the kind needs must exist: the core calls them unchecked.
                let has_ops = match desc.kind {
                    Kind::Sink(_) => T::HAS_SINK_ENABLE && T::HAS_SINK_DISABLE,
                    Kind::Link(_) => T::HAS_LINK_ENABLE && T::HAS_LINK_DISABLE,
                    Kind::LinkSink(..) => {
                        T::HAS_SINK_ENABLE
                            && T::HAS_SINK_DISABLE
                            && T::HAS_LINK_ENABLE
                            && T::HAS_LINK_DISABLE
                    }
                    // perf pauses a source only when it can resume it.
                    Kind::Source(_) => {
                        T::HAS_SOURCE_ENABLE
                            && T::HAS_SOURCE_DISABLE
                            && T::HAS_SOURCE_PAUSE_PERF == T::HAS_SOURCE_RESUME_PERF
                    }
                };
                let has_pm_ops = matches!(desc.kind, Kind::Source(_))
                    && T::HAS_SOURCE_PM_SAVE
                    && T::HAS_SOURCE_PM_RESTORE;
                if !has_ops || (pm_save && !has_pm_ops) {
                    return Err(EINVAL);
                }
                let (flags, cpu) = match desc.cpu {
                    Some(cpu) => (
                        bindings::CORESIGHT_DESC_CPU_BOUND,
                        i32::try_from(cpu).map_err(|_| EINVAL)?,
                    ),
                    None => (0, -1),
                };
                // SAFETY: `this` points to the registration being initialised; `ops` was
                // initialised above and is pinned with it.
                let ops =
                    unsafe { Opaque::cast_into(&raw const (*this.as_ptr()).ops) }.cast_const();
                // SAFETY: `dev` is a bound device. Nothing can fail between here and
                // `coresight_register()`, which releases the platform data on failure.
                let pdata =
                    from_err_ptr(unsafe { bindings::coresight_get_platform_data(dev.as_raw()) })?;
                let (ty, subtype) = desc.kind.raw();
                // SAFETY: An all-zero `coresight_desc` is valid (no access functions).
                let mut raw: bindings::coresight_desc = unsafe { core::mem::zeroed() };
                raw.type_ = ty;
                raw.subtype = subtype;
                raw.ops = ops;
                raw.pdata = pdata;
                raw.dev = dev.as_raw();
                raw.name = desc.name.as_char_ptr();
                raw.flags = flags;
                raw.cpu = cpu;
                raw.groups = OpsTable::<T>::groups();
                // SAFETY: `raw` is fully initialised; the core copies what it keeps (the name
                // with `dev_set_name()`) and releases `pdata` itself on failure. `ops` and
                // `data` live in this pinned registration, which unregisters before they go.
                let csdev = from_err_ptr(unsafe { bindings::coresight_register(&mut raw) })?;
                NonNull::new(csdev).ok_or(EINVAL)?
            },
            perf_linked: {
                let link = matches!(desc.kind, Kind::Source(SourceKind::Proc))
                    && T::HAS_SOURCE_ENABLE_PERF;
                if link {
                    // SAFETY: `csdev` was initialised above and is a registered per-CPU source.
                    let csdev = unsafe { (*this.as_ptr()).csdev };
                    // SAFETY: `csdev` is registered; the link is removed before it is
                    // unregistered.
                    let r = to_result(unsafe {
                        bindings::cspd_etm_perf_symlink(csdev.as_ptr(), true)
                    });
                    if let Err(e) = r {
                        // SAFETY: Registered above; nothing else refers to it yet.
                        unsafe { bindings::coresight_unregister(csdev.as_ptr()) };
                        return Err(e);
                    }
                }
                link
            },
            _pin: PhantomPinned,
        })
    }

    /// Returns the registered component.
    pub fn csdev(&self) -> &CsDevice {
        // SAFETY: By the type invariant the component stays registered while `self` exists.
        unsafe { CsDevice::from_raw(self.csdev.as_ptr()) }
    }

    /// Returns the operations' data.
    pub fn data(&self) -> &T {
        &self.data
    }
}

#[pinned_drop]
impl<T: Operations> PinnedDrop for Registration<T> {
    fn drop(self: Pin<&mut Self>) {
        let cs = self.csdev();
        // A source still enabled through sysfs (its device unbound while tracing) is disabled
        // first, so that no path keeps calling into this registration once it is gone.
        // SAFETY: `cs` is a registered component; `subtype` and `type` do not change.
        let source = unsafe { (*cs.as_raw()).type_ }
            == bindings::coresight_dev_type_CORESIGHT_DEV_TYPE_SOURCE;
        if source && cs.mode() == Mode::Sysfs {
            // SAFETY: `cs` is a registered source; the call takes the core's mutex itself.
            unsafe { bindings::coresight_disable_sysfs(cs.as_raw()) };
        }
        if self.perf_linked {
            // SAFETY: The link was made at registration; `csdev` is still registered.
            unsafe { bindings::cspd_etm_perf_symlink(self.csdev.as_ptr(), false) };
        }
        // SAFETY: By the type invariant `csdev` is registered.
        unsafe { bindings::coresight_unregister(self.csdev.as_ptr()) };
    }
}

/// The C operation tables of `T`.
struct OpsTable<T: Operations>(PhantomData<T>);

impl<T: Operations> OpsTable<T> {
    const SINK: bindings::coresight_ops_sink = bindings::coresight_ops_sink {
        enable: Some(Self::sink_enable),
        disable: Some(Self::sink_disable),
        alloc_buffer: if T::HAS_ALLOC_BUFFER {
            Some(Self::alloc_buffer)
        } else {
            None
        },
        free_buffer: if T::HAS_ALLOC_BUFFER {
            Some(Self::free_buffer)
        } else {
            None
        },
        update_buffer: if T::HAS_UPDATE_BUFFER {
            Some(Self::update_buffer)
        } else {
            None
        },
    };

    const LINK: bindings::coresight_ops_link = bindings::coresight_ops_link {
        enable: Some(Self::link_enable),
        disable: Some(Self::link_disable),
    };

    const SOURCE: bindings::coresight_ops_source = bindings::coresight_ops_source {
        enable: Some(Self::source_enable),
        disable: Some(Self::source_disable),
        resume_perf: if T::HAS_SOURCE_RESUME_PERF {
            Some(Self::resume_perf)
        } else {
            None
        },
        pause_perf: if T::HAS_SOURCE_PAUSE_PERF {
            Some(Self::pause_perf)
        } else {
            None
        },
    };

    const OPS: bindings::coresight_ops = bindings::coresight_ops {
        trace_id: if T::HAS_TRACE_ID {
            Some(Self::trace_id)
        } else {
            None
        },
        pm_save_disable: None,
        pm_restore_enable: None,
        sink_ops: if T::HAS_SINK_ENABLE {
            &Self::SINK
        } else {
            core::ptr::null()
        },
        link_ops: if T::HAS_LINK_ENABLE {
            &Self::LINK
        } else {
            core::ptr::null()
        },
        source_ops: if T::HAS_SOURCE_ENABLE {
            &Self::SOURCE
        } else {
            core::ptr::null()
        },
        helper_ops: core::ptr::null(),
        panic_ops: core::ptr::null(),
    };

    /// [`Self::OPS`] with the CPU PM operations, for a source that loses its context.
    const OPS_PM: bindings::coresight_ops = bindings::coresight_ops {
        pm_save_disable: if T::HAS_SOURCE_PM_SAVE {
            Some(Self::pm_save)
        } else {
            None
        },
        pm_restore_enable: if T::HAS_SOURCE_PM_RESTORE {
            Some(Self::pm_restore)
        } else {
            None
        },
        ..Self::OPS
    };

    /// How many attributes all the groups of [`Operations::ATTRIBUTE_GROUPS`] have.
    const NR_ATTRS: usize = {
        assert!(
            T::ATTRIBUTE_GROUPS.len() <= MAX_ATTRIBUTE_GROUPS,
            "a component has at most MAX_ATTRIBUTE_GROUPS attribute groups"
        );
        let mut n = 0;
        let mut g = 0;
        while g < T::ATTRIBUTE_GROUPS.len() {
            n += T::ATTRIBUTE_GROUPS[g].attributes.len();
            g += 1;
        }
        assert!(
            n <= MAX_ATTRIBUTES,
            "a component has at most MAX_ATTRIBUTES attributes"
        );
        assert!(
            n == 0 || T::HAS_SHOW,
            "a component with attributes implements `show`"
        );
        n
    };

    /// The attributes of all the groups, one group after the other, as sysfs takes them.
    const ATTRS: [bindings::device_attribute; MAX_ATTRIBUTES] = {
        // SAFETY: An all-zero `device_attribute` is valid: no name, no callbacks.
        let mut a: [bindings::device_attribute; MAX_ATTRIBUTES] = unsafe { core::mem::zeroed() };
        let mut i = 0;
        let mut g = 0;
        while g < T::ATTRIBUTE_GROUPS.len() && g < MAX_ATTRIBUTE_GROUPS {
            let attrs = T::ATTRIBUTE_GROUPS[g].attributes;
            let mut j = 0;
            while j < attrs.len() && i < MAX_ATTRIBUTES {
                let attr = &attrs[j];
                a[i].attr.name = attr.name.to_bytes_with_nul().as_ptr().cast();
                a[i].attr.mode = match attr.mode {
                    AttributeMode::ReadOnly => 0o444,
                    AttributeMode::ReadWrite => 0o644,
                    AttributeMode::WriteOnly => 0o200,
                };
                a[i].__bindgen_anon_1.show = match attr.mode {
                    AttributeMode::WriteOnly => None,
                    _ => Some(Self::show),
                };
                a[i].__bindgen_anon_2.store = match attr.mode {
                    AttributeMode::ReadOnly => None,
                    _ if T::HAS_STORE => Some(Self::store),
                    _ => None,
                };
                i += 1;
                j += 1;
            }
            g += 1;
        }
        a
    };

    /// [`Self::ATTRS`] in static memory, which the pointers below point into.
    const ATTRS_STATIC: &'static [bindings::device_attribute; MAX_ATTRIBUTES] = &Self::ATTRS;

    /// The attribute lists of the groups, each ending in a NULL, one after the other.
    const ATTR_LIST: [*const bindings::attribute; MAX_ATTRIBUTES + MAX_ATTRIBUTE_GROUPS] = {
        let mut p = [core::ptr::null(); MAX_ATTRIBUTES + MAX_ATTRIBUTE_GROUPS];
        let mut i = 0;
        let mut at = 0;
        let mut g = 0;
        while g < T::ATTRIBUTE_GROUPS.len() && g < MAX_ATTRIBUTE_GROUPS {
            let mut j = 0;
            while j < T::ATTRIBUTE_GROUPS[g].attributes.len() && i < MAX_ATTRIBUTES {
                p[at] = &raw const Self::ATTRS_STATIC[i].attr;
                i += 1;
                j += 1;
                at += 1;
            }
            // The list's NULL.
            at += 1;
            g += 1;
        }
        p
    };

    /// [`Self::ATTR_LIST`] in static memory.
    const ATTR_LIST_STATIC: &'static [*const bindings::attribute;
                 MAX_ATTRIBUTES + MAX_ATTRIBUTE_GROUPS] = &Self::ATTR_LIST;

    /// The attribute groups of the component's directory.
    const GROUP_ARRAY: [bindings::attribute_group; MAX_ATTRIBUTE_GROUPS] = {
        // SAFETY: An all-zero `attribute_group` is valid: no name, no attributes.
        let mut a: [bindings::attribute_group; MAX_ATTRIBUTE_GROUPS] =
            unsafe { core::mem::zeroed() };
        let mut at = 0;
        let mut g = 0;
        while g < T::ATTRIBUTE_GROUPS.len() && g < MAX_ATTRIBUTE_GROUPS {
            let group = &T::ATTRIBUTE_GROUPS[g];
            if let Some(name) = group.name {
                a[g].name = name.to_bytes_with_nul().as_ptr().cast();
            }
            if at < MAX_ATTRIBUTES + MAX_ATTRIBUTE_GROUPS {
                a[g].__bindgen_anon_2.attrs_const = &raw const Self::ATTR_LIST_STATIC[at];
            }
            at += group.attributes.len() + 1;
            g += 1;
        }
        a
    };

    /// [`Self::GROUP_ARRAY`] in static memory.
    const GROUP_ARRAY_STATIC: &'static [bindings::attribute_group; MAX_ATTRIBUTE_GROUPS] =
        &Self::GROUP_ARRAY;

    /// The NULL-terminated list of groups `coresight_register()` takes.
    const GROUPS: [*const bindings::attribute_group; MAX_ATTRIBUTE_GROUPS + 1] = {
        let mut p = [core::ptr::null(); MAX_ATTRIBUTE_GROUPS + 1];
        let mut g = 0;
        while g < T::ATTRIBUTE_GROUPS.len() && g < MAX_ATTRIBUTE_GROUPS {
            p[g] = &raw const Self::GROUP_ARRAY_STATIC[g];
            g += 1;
        }
        p
    };

    /// [`Self::GROUPS`] in static memory.
    const GROUPS_STATIC: &'static [*const bindings::attribute_group; MAX_ATTRIBUTE_GROUPS + 1] =
        &Self::GROUPS;

    /// Returns the attribute groups for `struct coresight_desc`: none without attributes.
    fn groups() -> *mut *const bindings::attribute_group {
        if Self::NR_ATTRS == 0 {
            core::ptr::null_mut()
        } else {
            // The C core only reads the list (it becomes the device's `groups`).
            Self::GROUPS_STATIC.as_ptr().cast_mut()
        }
    }

    /// Returns the index of the attribute `attr` in the list of all the groups' attributes.
    fn attr_index(attr: *mut bindings::device_attribute) -> Option<usize> {
        let base = Self::ATTRS_STATIC.as_ptr().addr();
        let off = attr.addr().checked_sub(base)?;
        let size = core::mem::size_of::<bindings::device_attribute>();
        let index = off / size;
        (off % size == 0 && index < Self::NR_ATTRS).then_some(index)
    }

    /// Returns the operations' data and component of the device of a sysfs callback.
    ///
    /// # Safety
    ///
    /// `dev` is the `struct device` embedded in a component registered by a `Registration<T>`.
    unsafe fn data_of_dev<'a>(dev: *mut bindings::device) -> (&'a T, &'a CsDevice) {
        // SAFETY: `dev` is the `dev` field of a `struct coresight_device`.
        let csdev = unsafe { container_of!(dev, bindings::coresight_device, dev) };
        // SAFETY: The component was registered by a `Registration<T>` and stays registered
        // while sysfs calls into its attributes.
        unsafe { Self::data(csdev) }
    }

    /// The `show` callback of every attribute.
    ///
    /// # Safety
    ///
    /// Called by sysfs for an attribute of a component registered by a `Registration<T>`, with
    /// `buf` a page.
    unsafe extern "C" fn show(
        dev: *mut bindings::device,
        attr: *mut bindings::device_attribute,
        buf: *mut c_char,
    ) -> isize {
        let Some(index) = Self::attr_index(attr) else {
            // CAST: an errno fits in `isize`.
            return EINVAL.to_errno() as isize;
        };
        // SAFETY: sysfs calls this for a device registered by a `Registration<T>`.
        let (data, cs) = unsafe { Self::data_of_dev(dev) };
        // SAFETY: sysfs gives `show` a page to fill, which nothing else touches meanwhile.
        let page =
            unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), crate::page::PAGE_SIZE) };
        let mut out = AttributeBuf { buf: page, len: 0 };
        match data.show(cs, index, &mut out) {
            // CAST: at most a page; an errno fits in `isize`.
            Ok(()) => out.len as isize,
            Err(e) => e.to_errno() as isize,
        }
    }

    /// The `store` callback of writable attributes.
    ///
    /// # Safety
    ///
    /// Called by sysfs for an attribute of a component registered by a `Registration<T>`, with
    /// `buf` holding `count` bytes.
    unsafe extern "C" fn store(
        dev: *mut bindings::device,
        attr: *mut bindings::device_attribute,
        buf: *const c_char,
        count: usize,
    ) -> isize {
        let Some(index) = Self::attr_index(attr) else {
            // CAST: an errno fits in `isize`.
            return EINVAL.to_errno() as isize;
        };
        // SAFETY: sysfs calls this for a device registered by a `Registration<T>`.
        let (data, cs) = unsafe { Self::data_of_dev(dev) };
        // SAFETY: sysfs passes `count` readable bytes at `buf`.
        let input = unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), count) };
        match data.store(cs, index, input) {
            // CAST: `count` is at most a page; an errno fits in `isize`.
            Ok(()) => count as isize,
            Err(e) => e.to_errno() as isize,
        }
    }

    /// Returns the operations' data of a component registered by [`Registration`].
    ///
    /// # Safety
    ///
    /// `csdev` is a valid component registered by a `Registration<T>`.
    unsafe fn data<'a>(csdev: *mut bindings::coresight_device) -> (&'a T, &'a CsDevice) {
        // SAFETY: `csdev->ops` points to the `ops` field of the pinned `Registration<T>` that
        // registered it, which outlives every call of an operation.
        let reg = unsafe {
            let ops = (*csdev)
                .ops
                .cast_mut()
                .cast::<Opaque<bindings::coresight_ops>>();
            &*container_of!(ops, Registration<T>, ops)
        };
        // SAFETY: `csdev` is registered while the operation runs.
        (&reg.data, unsafe { CsDevice::from_raw(csdev) })
    }

    /// The `trace_id` op.
    ///
    /// # Safety
    ///
    /// Called by the CoreSight core for a component registered by a `Registration<T>`, with
    /// valid pointers.
    unsafe extern "C" fn trace_id(
        csdev: *mut bindings::coresight_device,
        mode: bindings::cs_mode,
        sink: *mut bindings::coresight_device,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core calls this for a component registered by `Registration<T>`.
            let (data, cs) = unsafe { Self::data(csdev) };
            // SAFETY: `sink` is null or a registered component.
            let sink = (!sink.is_null()).then(|| unsafe { CsDevice::from_raw(sink) });
            let mode = Mode::from_raw(mode).ok_or(EINVAL)?;
            Ok(c_int::from(data.trace_id(cs, mode, sink)?))
        })
    }

    /// The sink `enable` op.
    ///
    /// # Safety
    ///
    /// Called by the CoreSight core for a component registered by a `Registration<T>`, with
    /// valid pointers.
    unsafe extern "C" fn sink_enable(
        csdev: *mut bindings::coresight_device,
        mode: bindings::cs_mode,
        path: *mut bindings::coresight_path,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core calls this for a component registered by `Registration<T>`.
            let (data, cs) = unsafe { Self::data(csdev) };
            // SAFETY: The core passes a valid path.
            let path = unsafe { Path::from_raw(path) };
            match Mode::from_raw(mode).ok_or(EINVAL)? {
                Mode::Perf => {
                    if !T::HAS_SINK_ENABLE_PERF {
                        return Err(EINVAL);
                    }
                    let handle = path.aux_handle().ok_or(EINVAL)?;
                    // SAFETY: The handle is open (see `Path::aux_handle`).
                    let buf = unsafe { bindings::cspd_etm_perf_sink_config(handle.as_raw()) };
                    if buf.is_null() {
                        return Err(EINVAL);
                    }
                    // SAFETY: The session's sink buffer was allocated by `alloc_buffer` of a sink
                    // of this path's kind: the core only puts sinks with the same operations in
                    // one session (`sinks_compatible()`), and these operations are `T`'s. It
                    // lives until the session ends, after this transaction.
                    let buf = unsafe { &*buf.cast::<perf::AuxBuffer<T::PerfBuffer>>() };
                    data.sink_enable_perf(cs, path, handle, buf)?;
                }
                mode => data.sink_enable(cs, mode, path)?,
            }
            Ok(0)
        })
    }

    /// The sink `disable` op.
    ///
    /// # Safety
    ///
    /// Called by the CoreSight core for a component registered by a `Registration<T>`, with
    /// valid pointers.
    unsafe extern "C" fn sink_disable(csdev: *mut bindings::coresight_device) -> c_int {
        from_result(|| {
            // SAFETY: The core calls this for a component registered by `Registration<T>`.
            let (data, cs) = unsafe { Self::data(csdev) };
            data.sink_disable(cs)?;
            Ok(0)
        })
    }

    /// The sink `alloc_buffer` op: the session's [`perf::AuxBuffer`], or NULL.
    ///
    /// # Safety
    ///
    /// Called by the CoreSight core for a component registered by a `Registration<T>`, with
    /// `pages` holding `nr_pages` pointers to the AUX area's pages, valid until `free_buffer`.
    unsafe extern "C" fn alloc_buffer(
        csdev: *mut bindings::coresight_device,
        event: *mut bindings::perf_event,
        pages: *mut *mut c_void,
        nr_pages: c_int,
        overwrite: bool,
    ) -> *mut c_void {
        // SAFETY: The core calls this for a component registered by `Registration<T>`.
        let (data, cs) = unsafe { Self::data(csdev) };
        // SAFETY: The core passes the live event whose AUX area is being mapped.
        let event = unsafe { perf::PerfEvent::from_raw(event) };
        let buffer = || -> Result<KBox<perf::AuxBuffer<T::PerfBuffer>>> {
            let own = data.alloc_buffer(cs, event)?;
            let nr_pages = usize::try_from(nr_pages).map_err(|_| EINVAL)?;
            // SAFETY: The core's `pages` hold `nr_pages` pages valid until `free_buffer`, which
            // drops the buffer.
            let buf = unsafe { perf::AuxBuffer::new(pages, nr_pages, overwrite, own) }?;
            Ok(KBox::new(buf, GFP_KERNEL)?)
        };
        match buffer() {
            Ok(b) => KBox::into_raw(b).cast(),
            Err(_) => core::ptr::null_mut(),
        }
    }

    /// The sink `free_buffer` op.
    ///
    /// # Safety
    ///
    /// `config` is what `alloc_buffer` of this `T` returned, not freed yet.
    unsafe extern "C" fn free_buffer(config: *mut c_void) {
        if !config.is_null() {
            // SAFETY: `alloc_buffer` made it with `KBox::into_raw`; the core frees it once.
            drop(unsafe { KBox::from_raw(config.cast::<perf::AuxBuffer<T::PerfBuffer>>()) });
        }
    }

    /// The sink `update_buffer` op.
    ///
    /// # Safety
    ///
    /// Called by the CoreSight core for a component registered by a `Registration<T>`, with the
    /// open transaction `handle` and the `sink_config` `alloc_buffer` of this `T` returned.
    unsafe extern "C" fn update_buffer(
        csdev: *mut bindings::coresight_device,
        handle: *mut bindings::perf_output_handle,
        sink_config: *mut c_void,
    ) -> c_ulong {
        if sink_config.is_null() || handle.is_null() {
            return 0;
        }
        // SAFETY: The core calls this for a component registered by `Registration<T>`.
        let (data, cs) = unsafe { Self::data(csdev) };
        // SAFETY: The core passes its open transaction.
        let handle = unsafe { perf::AuxHandle::from_raw(handle) };
        // SAFETY: `sink_config` is this `T`'s buffer (see `sink_enable`), live until the session
        // ends.
        let buf = unsafe { &*sink_config.cast::<perf::AuxBuffer<T::PerfBuffer>>() };
        // `c_ulong` is `usize` in the kernel.
        data.update_buffer(cs, handle, buf)
    }

    /// The link `enable` op.
    ///
    /// # Safety
    ///
    /// Called by the CoreSight core for a component registered by a `Registration<T>`, with
    /// valid pointers.
    unsafe extern "C" fn link_enable(
        csdev: *mut bindings::coresight_device,
        inport: *mut bindings::coresight_connection,
        outport: *mut bindings::coresight_connection,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core calls this for a component registered by `Registration<T>`, with
            // valid connections.
            let (data, cs, i, o) = unsafe {
                let (d, c) = Self::data(csdev);
                (
                    d,
                    c,
                    Connection::from_raw(inport),
                    Connection::from_raw(outport),
                )
            };
            data.link_enable(cs, i, o)?;
            Ok(0)
        })
    }

    /// The link `disable` op.
    ///
    /// # Safety
    ///
    /// Called by the CoreSight core for a component registered by a `Registration<T>`, with
    /// valid pointers.
    unsafe extern "C" fn link_disable(
        csdev: *mut bindings::coresight_device,
        inport: *mut bindings::coresight_connection,
        outport: *mut bindings::coresight_connection,
    ) {
        // SAFETY: The core calls this for a component registered by `Registration<T>`, with
        // valid connections.
        let (data, cs, i, o) = unsafe {
            let (d, c) = Self::data(csdev);
            (
                d,
                c,
                Connection::from_raw(inport),
                Connection::from_raw(outport),
            )
        };
        data.link_disable(cs, i, o);
    }

    /// The source `enable` op.
    ///
    /// # Safety
    ///
    /// Called by the CoreSight core for a component registered by a `Registration<T>`, with
    /// valid pointers.
    unsafe extern "C" fn source_enable(
        csdev: *mut bindings::coresight_device,
        event: *mut bindings::perf_event,
        mode: bindings::cs_mode,
        path: *mut bindings::coresight_path,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core calls this for a component registered by `Registration<T>`.
            let (data, cs) = unsafe { Self::data(csdev) };
            // SAFETY: The core passes a valid path.
            let p = unsafe { Path::from_raw(path) };
            match Mode::from_raw(mode).ok_or(EINVAL)? {
                Mode::Perf => {
                    if !T::HAS_SOURCE_ENABLE_PERF || event.is_null() {
                        return Err(EINVAL);
                    }
                    // SAFETY: In perf mode the core passes the live event being started.
                    let event = unsafe { perf::PerfEvent::from_raw(event) };
                    data.source_enable_perf(cs, event, p)?;
                }
                mode => data.source_enable(cs, mode, p)?,
            }
            // The core leaves it to the drivers of per-CPU sources to record the path they
            // enabled (`coresight_disable_sysfs()` reads it back).
            // SAFETY: `csdev` is valid; the core serialises enable and disable of a source.
            unsafe {
                if (*csdev).subtype.source_subtype
                    == bindings::coresight_dev_subtype_source_CORESIGHT_DEV_SUBTYPE_SOURCE_PROC
                {
                    (*csdev).path = path;
                }
            }
            Ok(0)
        })
    }

    /// The source `disable` op.
    ///
    /// # Safety
    ///
    /// Called by the CoreSight core for a component registered by a `Registration<T>`, with
    /// valid pointers.
    unsafe extern "C" fn source_disable(
        csdev: *mut bindings::coresight_device,
        event: *mut bindings::perf_event,
    ) {
        // SAFETY: The core calls this for a component registered by `Registration<T>`.
        let (data, cs) = unsafe { Self::data(csdev) };
        // SAFETY: The core passes NULL or, in perf mode, the live event being stopped.
        let event = (!event.is_null()).then(|| unsafe { perf::PerfEvent::from_raw(event) });
        data.source_disable(cs, event);
        // SAFETY: `csdev` is valid; the core serialises enable and disable of a source.
        unsafe {
            if (*csdev).subtype.source_subtype
                == bindings::coresight_dev_subtype_source_CORESIGHT_DEV_SUBTYPE_SOURCE_PROC
            {
                (*csdev).path = core::ptr::null_mut();
            }
        }
    }

    /// The source `pause_perf` op.
    ///
    /// # Safety
    ///
    /// Called by the CoreSight core for a component registered by a `Registration<T>`, with a
    /// valid pointer.
    unsafe extern "C" fn pause_perf(csdev: *mut bindings::coresight_device) {
        // SAFETY: The core calls this for a component registered by `Registration<T>`.
        let (data, cs) = unsafe { Self::data(csdev) };
        data.source_pause_perf(cs);
    }

    /// The source `resume_perf` op.
    ///
    /// # Safety
    ///
    /// Called by the CoreSight core for a component registered by a `Registration<T>`, with a
    /// valid pointer.
    unsafe extern "C" fn resume_perf(csdev: *mut bindings::coresight_device) -> c_int {
        from_result(|| {
            // SAFETY: The core calls this for a component registered by `Registration<T>`.
            let (data, cs) = unsafe { Self::data(csdev) };
            data.source_resume_perf(cs)?;
            Ok(0)
        })
    }

    /// The `pm_save_disable` op.
    ///
    /// # Safety
    ///
    /// Called by the CoreSight core for a component registered by a `Registration<T>`, with a
    /// valid pointer.
    unsafe extern "C" fn pm_save(csdev: *mut bindings::coresight_device) -> c_int {
        from_result(|| {
            // SAFETY: The core calls this for a component registered by `Registration<T>`.
            let (data, cs) = unsafe { Self::data(csdev) };
            data.source_pm_save(cs)?;
            Ok(0)
        })
    }

    /// The `pm_restore_enable` op.
    ///
    /// # Safety
    ///
    /// Called by the CoreSight core for a component registered by a `Registration<T>`, with a
    /// valid pointer.
    unsafe extern "C" fn pm_restore(csdev: *mut bindings::coresight_device) {
        // SAFETY: The core calls this for a component registered by `Registration<T>`.
        let (data, cs) = unsafe { Self::data(csdev) };
        data.source_pm_restore(cs);
    }
}
