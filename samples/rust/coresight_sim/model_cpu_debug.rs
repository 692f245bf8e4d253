// SPDX-License-Identifier: GPL-2.0

//! Register-level model (placeholder, filled in by the cpu_debug work).
