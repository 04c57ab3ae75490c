// Package treecodec is the compact tree encoding a *cache.Compact keeps:
// a pre-parsed binary form of the JSON-like tree of an
// *unstructured.Unstructured, with no JSON scanning, escaping or number
// parsing to read it.
//
// The encoding: a tag byte per value; maps as a uvarint entry count then,
// per entry, the key's uvarint length and bytes and the value; lists as a
// uvarint count then the values; integers as zigzag varints; floats as 8
// little-endian bytes; strings as a uvarint length and the bytes; and
// after the top-level map a 4-byte little-endian count of the non-empty
// string values. A map's count may exceed its distinct keys: entries are
// read in order and a later entry of the same key replaces an earlier one,
// as JSON decoding does with duplicate keys. A nested map or list of
// SizedMin bytes or more is prefixed with its length (TagSized).
//
// Encode writes it from a tree, internal/decode writes it straight from
// JSON (decode.TreeObject), Decode and Reader read it. It is lossless for
// the trees of *unstructured.Unstructured: Decode(Encode(m)) is
// reflect.DeepEqual to m (int64 stays int64, float64 float64, json.Number
// json.Number). Decoded strings share memory with the encoding, which
// must not be modified afterwards. Package cache builds its Compact on
// it; dynamicinformer's disk cache stores objects in it (Encoding reads
// a Compact's). Nothing here is set at init: every function works as soon
// as the package is imported.
package treecodec
