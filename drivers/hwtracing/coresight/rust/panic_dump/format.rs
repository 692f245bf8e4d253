// SPDX-License-Identifier: GPL-2.0

//! Dump format (placeholder).
