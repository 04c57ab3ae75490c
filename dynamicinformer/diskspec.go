package dynamicinformer

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	ikcache "github.com/informerkit/informerkit/cache"
)

// diskSpecVersion is the version of the stored spec encoding (diskSpec).
// Raise it only for a change that must make every stored cache a cold
// start ("another informer spec"): one that changes what an existing
// spec's objects are.
const diskSpecVersion = 1

// diskSpec is key as text: what a stored state's spec must equal, and
// what its file name is derived from (diskName). It is versioned and
// field by field, in this form:
//
//	informerkit-spec/1 resource="widgets" group="example.com" version="v1" projection.StripManagedFields=true
//
// after the version, name=value pairs sorted by name: strings quoted
// (Go syntax), booleans true, integers in decimal (a duration in
// nanoseconds). A field at its zero value is left out, so a field added
// to spec or to Projection (or to cache.CompactorOptions inside it)
// leaves the encoding of every spec that does not set it unchanged:
// caches stored before the field existed stay valid, under the same
// file name. Projection is written by its Go field names, so renaming
// one of its fields (not reordering them) changes the encoding of specs
// that set it.
//
// A shard source is written as shardSource=true: two informers of one
// factory that differ only by their source share a name, which claim
// refuses to the second.
func diskSpec(key spec) string { return encodeDiskSpec(key, key.projection) }

// encodeDiskSpec is diskSpec with projection standing for key's
// Projection (a test passes a struct with more fields, as a later
// Projection would have).
func encodeDiskSpec(key spec, projection any) string {
	var e specEncoder
	e.str("group", key.gvr.Group)
	e.str("version", key.gvr.Version) // "" (left out) when following
	e.str("resource", key.gvr.Resource)
	e.str("namespaces", key.namespaces)
	e.flag("permitted", key.permitted)
	e.str("candidates", key.candidates)
	e.str("labelSelector", key.labelSelector)
	e.str("fieldSelector", key.fieldSelector)
	e.value("projection", reflect.ValueOf(projection))
	e.str("shard", key.shard)
	e.flag("shardSource", key.shardSource != nil)
	e.str("transformKey", key.transformKey)
	e.str("tweakKey", key.tweakKey)
	e.str("sharingKey", key.sharingKey)
	return e.String()
}

// diskSpecVersionAt is what specAt appends for a following informer:
// the version it follows, as a field of the encoding.
func diskSpecVersionAt(v string) string { return " followed=" + strconv.Quote(v) }

// specEncoder collects a spec's non-zero fields.
type specEncoder struct{ fields []string }

func (e *specEncoder) add(name, value string) { e.fields = append(e.fields, name+"="+value) }

func (e *specEncoder) str(name, v string) {
	if v != "" {
		e.add(name, strconv.Quote(v))
	}
}

func (e *specEncoder) flag(name string, v bool) {
	if v {
		e.add(name, "true")
	}
}

// value adds v's non-zero fields: a struct's by their Go names under
// name (unexported ones too: a struct equal in every field written is
// the same value), scalars as str, flag and decimal integers. Kinds a
// comparable Projection could still hold (pointers, interfaces,
// arrays) are written with fmt; TestDiskSpecCoversProjection keeps
// Projection to the kinds above.
func (e *specEncoder) value(name string, v reflect.Value) {
	if !v.IsValid() || v.IsZero() {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			e.value(name+"."+t.Field(i).Name, v.Field(i))
		}
	case reflect.Bool:
		e.flag(name, v.Bool())
	case reflect.String:
		e.str(name, v.String())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.add(name, strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.add(name, strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		e.add(name, strconv.FormatFloat(v.Float(), 'g', -1, 64))
	default:
		e.add(name, strconv.Quote(fmt.Sprint(v)))
	}
}

// String is the version, then the fields sorted by name.
func (e *specEncoder) String() string {
	slices.Sort(e.fields)
	return "informerkit-spec/" + strconv.Itoa(diskSpecVersion) + " " + strings.Join(e.fields, " ")
}

// legacyDiskSpec is key's spec as informerkit wrote it before the
// versioned encoding (the Projection printed with %+v), frozen as those
// versions wrote it, so that a cache they stored is taken over once
// (restore) rather than left behind. "" when key holds something those
// versions could not store (a Projection field added since).
func legacyDiskSpec(key spec) string {
	p := key.projection
	o := p.CompactOptions
	known := Projection{MetadataOnly: p.MetadataOnly, StripManagedFields: p.StripManagedFields, DropLastApplied: p.DropLastApplied,
		Fields: p.Fields, Compact: p.Compact, CompactOptions: ikcache.CompactorOptions{MaxDecoded: o.MaxDecoded, Idle: o.Idle, KeepListsOnSecondRead: o.KeepListsOnSecondRead}}
	if known != p {
		return ""
	}
	text := fmt.Sprintf("gvr=%s/%s, Resource=%s ns=%q label=%q field=%q projection={MetadataOnly:%t StripManagedFields:%t DropLastApplied:%t Fields:%s Compact:%t CompactOptions:{MaxDecoded:%d Idle:%v KeepListsOnSecondRead:%t}} shard=%q transform=%q tweak=%q sharing=%q",
		key.gvr.Group, key.gvr.Version, key.gvr.Resource, key.namespaces, key.labelSelector, key.fieldSelector,
		p.MetadataOnly, p.StripManagedFields, p.DropLastApplied, p.Fields, p.Compact, o.MaxDecoded, o.Idle, o.KeepListsOnSecondRead,
		key.shard, key.transformKey, key.tweakKey, key.sharingKey)
	if key.permitted {
		text += fmt.Sprintf(" permitted=%q", key.candidates)
	}
	if key.shardSource != nil {
		text += " shard-source"
	}
	return text
}

// legacyVersionAt is what the unversioned encoding appended for a
// following informer.
func legacyVersionAt(v string) string { return " version=" + v }
