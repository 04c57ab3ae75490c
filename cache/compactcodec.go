package cache

import "github.com/informerkit/informerkit/internal/treecodec"

// The encoding a Compact keeps is internal/treecodec's (shared with the
// decoder that writes it straight from JSON, internal/decode, and with
// dynamicinformer's disk cache). Its errors, as this package names them:
var (
	// errNotJSONLike: a value of a type JSON decoding never produces
	// (int, []string, a struct …).
	errNotJSONLike = treecodec.ErrNotJSONLike
	// errCorruptEncoding: bytes the encoder did not write.
	errCorruptEncoding = treecodec.ErrCorrupt
)

// compactMeta is what a Compact keeps outside its encoding, read from the
// encoding so that its strings share the encoding's memory.
type compactMeta struct {
	name, uid, resourceVersion string
	labels                     map[string]string
	labelsOK                   bool // metadata.labels is absent or a map of strings and nulls
}

// readCompactMeta reads metadata.name, uid, resourceVersion and labels
// from an encoding.
func readCompactMeta(enc []byte) (compactMeta, error) {
	var m compactMeta
	if len(enc) < 4 {
		return m, errCorruptEncoding
	}
	r := treecodec.Reader{Enc: enc[:len(enc)-4]}
	m.labelsOK = true
	_, err := r.MapEntries(func(k string) error {
		if k != "metadata" {
			return r.Skip()
		}
		// A later metadata replaces an earlier one (an encoding written
		// straight from JSON keeps duplicate keys; see decode.TreeObject).
		m = compactMeta{labelsOK: true}
		_, err := r.MapEntries(func(k string) error {
			var err error
			switch k {
			case "name":
				m.name, _, err = r.StringValue()
			case "uid":
				m.uid, _, err = r.StringValue()
			case "resourceVersion":
				m.resourceVersion, _, err = r.StringValue()
			case "labels":
				m.labels = map[string]string{}
				var isMap bool
				isMap, err = r.MapEntries(func(k string) error {
					if r.Pos < len(r.Enc) && r.Enc[r.Pos] == treecodec.TagNull {
						r.Pos++
						m.labels[k] = ""
						return nil
					}
					v, ok, err := r.StringValue()
					if !ok {
						m.labelsOK = false
					}
					m.labels[k] = v
					return err
				})
				if !isMap {
					m.labels = nil
				}
			default:
				err = r.Skip()
			}
			return err
		})
		return err
	})
	return m, err
}
