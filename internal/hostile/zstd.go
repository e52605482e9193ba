// Package hostile builds the inputs a hostile client sends, for the tests
// that prove tripod refuses them: it holds no broker code and nothing in
// tripod's serving path imports it.
package hostile

// ZstdZeros returns a zstd frame of prefix in a raw block, then n zero
// bytes in run-length blocks of 128 KiB, 4 bytes a block: a frame of about
// 32 KiB inflates to 1 GiB. With prefix the start of a record whose value
// is the zeros, it is a decompression bomb of one record.
func ZstdZeros(prefix []byte, n int64) []byte {
	// Magic, a frame header descriptor without content size (one byte of
	// window descriptor follows), a window of 128 KiB (log 17).
	out := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, (17 - 10) << 3}
	block := func(last bool, kind, size int) {
		h := uint32(size)<<3 | uint32(kind)<<1
		if last {
			h |= 1
		}
		out = append(out, byte(h), byte(h>>8), byte(h>>16))
	}
	block(n == 0, 0, len(prefix))
	out = append(out, prefix...)
	for n > 0 {
		size := min(n, 128<<10)
		n -= size
		block(n == 0, 1, int(size))
		out = append(out, 0)
	}
	return out
}
