package cache

import "github.com/informerkit/informerkit/internal/treecodec"

// The module's other packages (the disk cache of dynamicinformer) write
// and read objects in the Compact encoding through package treecodec.
func init() {
	treecodec.Encode = codec.encode
	treecodec.Decode = codec.decode
	treecodec.Encoding = func(obj interface{}) ([]byte, bool) {
		if c, ok := obj.(*Compact); ok {
			return c.enc, true
		}
		return nil, false
	}
}
