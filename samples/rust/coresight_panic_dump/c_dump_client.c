// SPDX-License-Identifier: GPL-2.0
/*
 * C panic dump client sample: shows that a C driver registers with the CoreSight panic dump
 * core through <linux/coresight-panic-dump.h>. At panic it writes the record "c-sample":
 * the text "c sample record\n" followed by 1024 bytes i = (255 - i % 256).
 */
#include <linux/coresight-panic-dump.h>
#include <linux/module.h>
#include <linux/string.h>

#define C_SAMPLE_TEXT "c sample record\n"
#define C_SAMPLE_TAIL 1024

static int c_sample_dump(void *data, void *buf, size_t size, size_t *len)
{
	size_t text = sizeof(C_SAMPLE_TEXT) - 1;
	size_t need = text + C_SAMPLE_TAIL, i;
	u8 *out = buf;

	if (size < need)
		return -ENOSPC;
	memcpy(out, C_SAMPLE_TEXT, text);
	for (i = 0; i < C_SAMPLE_TAIL; i++)
		out[text + i] = 255 - (i % 256);
	*len = need;
	return 0;
}

static const struct coresight_dump_desc c_sample_desc = {
	.name = "c-sample",
	.type = CORESIGHT_DUMP_OTHER,
	.cpu = CORESIGHT_DUMP_NO_CPU,
	.max_bytes = sizeof(C_SAMPLE_TEXT) - 1 + C_SAMPLE_TAIL,
	.dump = c_sample_dump,
};

static struct coresight_dump_entry *c_sample_entry;

static int __init c_dump_client_init(void)
{
	c_sample_entry = coresight_dump_add(&c_sample_desc);
	if (IS_ERR(c_sample_entry)) {
		pr_err("c_dump_client: coresight_dump_add failed: %pe\n", c_sample_entry);
		return PTR_ERR(c_sample_entry);
	}
	pr_info("c_dump_client: registered c-sample\n");
	return 0;
}

static void __exit c_dump_client_exit(void)
{
	coresight_dump_del(c_sample_entry);
}

module_init(c_dump_client_init);
module_exit(c_dump_client_exit);
MODULE_DESCRIPTION("C panic dump client sample");
MODULE_LICENSE("GPL");
