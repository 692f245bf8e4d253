// SPDX-License-Identifier: GPL-2.0

//! Hardware logic (placeholder, filled in by the tmc work).
