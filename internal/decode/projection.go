package decode

// Options says which fields to skip while decoding. The zero value decodes
// everything. Each option is one rule of Options.step, which both
// decoders (Object and List, TreeObject and TreeList) follow: a new
// option is a field here and a case there.
type Options struct {
	// SkipManagedFields leaves out metadata.managedFields, as
	// cache.StripManagedFields would remove it.
	SkipManagedFields bool
	// SkipLastApplied leaves out the annotation
	// kubectl.kubernetes.io/last-applied-configuration, and the
	// annotations map when that was its only entry, as
	// cache.DropLastAppliedConfiguration would.
	SkipLastApplied bool
}

// LastAppliedAnnotation is the annotation SkipLastApplied leaves out.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// mode tells the decoders where in the object they are, for skipping.
type mode uint8

const (
	modePlain       mode = iota
	modeRoot             // the top-level object
	modeMetadata         // the object under the top-level "metadata"
	modeAnnotations      // metadata.annotations, read without the last-applied annotation
	modeList             // a top-level list: its "items" are objects in modeRoot
	modeManaged          // an element of metadata.managedFields
	modeFields           // an object in a managedFields entry's fieldsV1
)

// step is what a decoder does with the value of one member of an object.
type step struct {
	// skip: the options leave the value out; it is checked as decoding
	// would check it (syntax, depth, numbers in range), never built.
	skip bool
	// child is the mode of the value when it is an object, elem that of
	// its elements when it is an array.
	child, elem mode
	// own: a string value unique to the object (metadata.name, uid,
	// resourceVersion), which interning would only cost a lookup.
	own bool
}

// step returns what to do with the value of key, a member of an object in
// mode m (m is not modePlain: every member of a plain object is kept, in
// modePlain). It is the one place where the options' rules are written.
// A map left empty by skipping in modeAnnotations is left out too (see
// decoder.member and decoder.treeObject).
func (o *Options) step(m mode, key []byte) step {
	switch m {
	case modeList:
		if string(key) == "items" {
			return step{elem: modeRoot}
		}
	case modeRoot:
		if string(key) == "metadata" {
			return step{child: modeMetadata}
		}
	case modeMetadata:
		switch string(key) {
		case "managedFields":
			if o.SkipManagedFields {
				return step{skip: true}
			}
			return step{elem: modeManaged}
		case "annotations":
			if o.SkipLastApplied {
				return step{child: modeAnnotations}
			}
		case "name", "uid", "resourceVersion":
			return step{own: true}
		}
	case modeManaged:
		if string(key) == "fieldsV1" {
			return step{child: modeFields}
		}
	case modeFields:
		return step{child: modeFields}
	case modeAnnotations:
		if string(key) == LastAppliedAnnotation {
			return step{skip: true}
		}
	}
	return step{}
}
