package network

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"reflect"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Decoding a request costs memory out of proportion to its frame: the
// decoder (franz-go's kmsg) checks an array's count only against the bytes
// left in the frame, so an array of elements of one or two bytes each on
// the wire decodes into Go structs of 30 to 100 bytes each, and a 20 MB
// Metadata request into half a gigabyte. DecodeCost walks a request body
// without allocating and returns what decoding it would allocate, so the
// reader refuses a request whose decoded form would exceed
// MaxDecodeExpansion × its frame + DecodeCostSlack before decoding it.
//
// The walk needs each request's wire layout at its version. kmsg does not
// export one, so requestShape derives it once per key and version from
// kmsg itself: a field is on the wire at a version if setting it changes
// the encoding, and its encoding follows from its Go type and whether the
// version is flexible. A tagged field (flexible versions) is left to the
// walk of the tag section, as an unknown one would be.

const (
	// MaxDecodeExpansion bounds the Go bytes a request may decode into,
	// per byte of its frame (beside DecodeCostSlack).
	MaxDecodeExpansion = 4
	// DecodeCostSlack is what any request may decode into beyond
	// MaxDecodeExpansion × its frame: small requests of short elements
	// (a Metadata request naming a hundred short topics) decode to more
	// than four times their few bytes, and are harmless.
	DecodeCostSlack = 1 << 20
	// tagGoBytes is what one tagged field costs decoded: an entry in the
	// struct's map of unknown tags (or a known tagged field's value).
	tagGoBytes = 96
	// pointerGoBytes is the allocation behind a nullable string's
	// pointer.
	pointerGoBytes = 16
	// tagExpansion bounds what a byte of a tagged field decodes into: a
	// known tagged field (an array of log directories in
	// BrokerHeartbeat) is decoded, not kept as bytes, and the walk does
	// not know its layout.
	tagExpansion = 24
)

// wireKind is how a field is encoded.
type wireKind uint8

const (
	// wireFixed is a fixed-size integer, boolean, float or UUID.
	wireFixed wireKind = iota
	// wireString is a string (int16 length, or a compact length when
	// flexible; nullable ones are *string in kmsg).
	wireString
	// wireBytes is a byte array (int32 length, or compact), which kmsg
	// decodes without copying.
	wireBytes
	// wireArray is an array of elements.
	wireArray
	// wireNullableStruct is a struct kmsg holds by pointer: an int8, -1
	// for null or 1, then the struct (DescribeTopicPartitions' Cursor).
	wireNullableStruct
)

// wireField is one field of a struct as a version encodes it.
type wireField struct {
	kind wireKind
	// fixed is the size of a wireFixed field or array element.
	fixed int
	// nullable is set for a string kmsg holds as *string: decoding one
	// that is not null allocates its pointer.
	nullable bool
	// elem is the element of an array (or a nullable struct's shape): a
	// struct's shape, or nil for an array of scalars described by
	// elemKind and fixed.
	elem     *wireShape
	elemKind wireKind
	// elemGoSize is the Go size of one element of an array, or of a
	// nullable struct.
	elemGoSize int
}

// wireShape is the wire layout of one struct of a request at one version.
type wireShape struct {
	fields []wireField
	// flexible versions end every struct with a tag section and use
	// compact lengths.
	flexible bool
}

// shapeKey names a request's shape: its key and version.
type shapeKey struct{ key, version int16 }

// shapes caches requestShape's layouts by shapeKey.
var shapes sync.Map

// requestShape returns the wire layout of key's request at version,
// derived once and then cached; an error says kmsg's type holds a field
// whose encoding the walk does not know.
func requestShape(key, version int16) (*wireShape, error) {
	k := shapeKey{key, version}
	if s, ok := shapes.Load(k); ok {
		return s.(*wireShape), nil
	}
	kreq := kmsg.RequestForKey(key)
	if kreq == nil {
		return nil, fmt.Errorf("no request type for api key %d", key)
	}
	kreq.SetVersion(version)
	p := shapeProber{key: key, version: version, flexible: kreq.IsFlexible()}
	s, err := p.shape(nil)
	if err != nil {
		return nil, fmt.Errorf("%s v%d: %w", kmsg.NameForKey(key), version, err)
	}
	shapes.Store(k, s)
	return s, nil
}

// shapeProber derives a request's wire layout by encoding variants of it.
type shapeProber struct {
	key, version int16
	flexible     bool
}

// build returns a request of the prober's key and version in which every
// array along path (field indexes, each naming an array field or a
// nullable struct of the struct before it) holds one element at its
// defaults (a nullable struct is set to one), and calls set, if not nil,
// on the innermost struct.
//
// The element must hold its defaults, not Go's zero values: kmsg encodes
// a tagged field whenever it differs from its default, at every flexible
// version, and a zero element of Fetch's partitions (HighWatermark 0, not
// its default MaxInt64) already carries a tag. isTagged then sees a probe
// turn a tag count of one into two, takes the tagged field for one in
// line, and the walk of every Fetch v12+ partition would read 24 bytes
// that are not there.
func (p shapeProber) build(path []int, set func(reflect.Value)) kmsg.Request {
	kreq := kmsg.RequestForKey(p.key)
	kreq.SetVersion(p.version)
	v := reflect.ValueOf(kreq).Elem()
	for _, i := range path {
		f := v.Field(i)
		if f.Kind() == reflect.Pointer {
			f.Set(reflect.New(f.Type().Elem()))
			v = f.Elem()
			setDefaults(v)
			continue
		}
		f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		v = f.Index(0)
		setDefaults(v)
	}
	if set != nil {
		set(v)
	}
	return kreq
}

// shape returns the layout of the struct at path.
func (p shapeProber) shape(path []int) (*wireShape, error) {
	base := p.build(path, nil).AppendTo(nil)
	t := reflect.TypeOf(p.build(path, nil)).Elem()
	for _, i := range path {
		t = t.Field(i).Type.Elem()
	}
	s := &wireShape{flexible: p.flexible}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if sf.Name == "Version" || sf.Name == "UnknownTags" || !sf.IsExported() {
			continue
		}
		var probeErr error
		probed := p.build(path, func(v reflect.Value) { probeErr = setProbe(v.Field(i)) }).AppendTo(nil)
		if probeErr != nil {
			return nil, fmt.Errorf("field %s: %w", sf.Name, probeErr)
		}
		if bytes.Equal(base, probed) {
			continue // not at this version
		}
		if p.flexible && isTagged(base, probed) {
			continue // a tagged field: the tag section's walk covers it
		}
		f, err := p.field(path, i, sf.Type)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", sf.Name, err)
		}
		s.fields = append(s.fields, f)
	}
	return s, nil
}

// field describes field i of the struct at path, of Go type t, which the
// version encodes in line.
func (p shapeProber) field(path []int, i int, t reflect.Type) (wireField, error) {
	if k, size, ok := scalarKind(t); ok {
		return wireField{kind: k, fixed: size, nullable: t.Kind() == reflect.Pointer}, nil
	}
	if t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct {
		elem, err := p.shape(append(append([]int(nil), path...), i))
		if err != nil {
			return wireField{}, err
		}
		return wireField{kind: wireNullableStruct, elem: elem, elemGoSize: int(t.Elem().Size())}, nil
	}
	if t.Kind() != reflect.Slice {
		return wireField{}, fmt.Errorf("unsupported type %v", t)
	}
	f := wireField{kind: wireArray, elemGoSize: int(t.Elem().Size())}
	if k, size, ok := scalarKind(t.Elem()); ok {
		if t.Elem().Kind() == reflect.Pointer {
			return wireField{}, fmt.Errorf("unsupported array of %v", t.Elem())
		}
		f.elemKind, f.fixed = k, size
		return f, nil
	}
	if t.Elem().Kind() != reflect.Struct {
		return wireField{}, fmt.Errorf("unsupported array of %v", t.Elem())
	}
	elem, err := p.shape(append(append([]int(nil), path...), i))
	if err != nil {
		return wireField{}, err
	}
	f.elem = elem
	return f, nil
}

// setDefaults sets v, an addressable kmsg struct, to its defaults.
func setDefaults(v reflect.Value) {
	if d, ok := v.Addr().Interface().(interface{ Default() }); ok {
		d.Default()
	}
}

// scalarKind returns how a field of Go type t that is not an array of
// elements is encoded, and its size when fixed.
func scalarKind(t reflect.Type) (wireKind, int, bool) {
	switch t.Kind() {
	case reflect.Bool, reflect.Int8, reflect.Uint8:
		return wireFixed, 1, true
	case reflect.Int16, reflect.Uint16:
		return wireFixed, 2, true
	case reflect.Int32, reflect.Uint32:
		return wireFixed, 4, true
	case reflect.Int64, reflect.Uint64, reflect.Float64:
		return wireFixed, 8, true
	case reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return wireFixed, t.Len(), true
		}
	case reflect.String:
		return wireString, 0, true
	case reflect.Pointer:
		if t.Elem().Kind() == reflect.String {
			return wireString, 0, true
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return wireBytes, 0, true
		}
	}
	return 0, 0, false
}

// setProbe sets v to a value whose encoding differs from its zero
// value's, in line or as a tagged field.
func setProbe(v reflect.Value) error {
	switch v.Kind() {
	// A field may hold a default (kmsg's constructors set some):
	// the probe differs from it.
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(5 + boolInt(v.Int() == 5))
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(5 + uint64(boolInt(v.Uint() == 5)))
	case reflect.Float64:
		v.SetFloat(5 + float64(boolInt(v.Float() == 5)))
	case reflect.String:
		v.SetString("abc")
	case reflect.Array:
		v.Index(0).Set(reflect.ValueOf(uint8(5)).Convert(v.Type().Elem()))
	case reflect.Pointer:
		if v.Type().Elem().Kind() == reflect.Struct {
			v.Set(reflect.New(v.Type().Elem()))
			break
		}
		if v.Type().Elem().Kind() != reflect.String {
			return fmt.Errorf("unsupported type %v", v.Type())
		}
		s := "abc"
		v.Set(reflect.ValueOf(&s))
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte("abc"))
			break
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		if v.Type().Elem().Kind() == reflect.String {
			v.Index(0).SetString("abc")
		}
	case reflect.Struct:
		// A struct that is not an array element is a tagged field
		// in every kmsg request: fill its first settable field.
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() && v.Type().Field(i).Name != "UnknownTags" {
				return setProbe(v.Field(i))
			}
		}
		return fmt.Errorf("unsupported type %v", v.Type())
	default:
		return fmt.Errorf("unsupported type %v", v.Type())
	}
	return nil
}

// boolInt is 1 for true, 0 for false.
func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// isTagged reports whether probed differs from base by a tagged field:
// the encodings' first difference turns a tag count of zero into one and
// the encoding grows. base must encode no tagged field (build keeps every
// struct at its defaults), or a tag count of one turned into two would
// look like an array of one element turned into two. A field in line either keeps the length (a fixed
// field) or changes a length or count from one that is never zero to one
// that is never one (a string of three bytes, an array of one element).
func isTagged(base, probed []byte) bool {
	if len(probed) == len(base) {
		return false
	}
	for i := range base {
		if i >= len(probed) || base[i] != probed[i] {
			return i < len(probed) && base[i] == 0 && probed[i] == 1
		}
	}
	return false
}

// DecodeCost returns the Go bytes that decoding body, a request of key at
// version, would allocate (an upper bound, to within allocation size
// classes), walking it without allocating; a body the walk cannot follow
// (truncated, a negative length) costs what was counted up to there, and
// the decoder refuses it.
func DecodeCost(key, version int16, body []byte) (int, error) {
	s, err := requestShape(key, version)
	if err != nil {
		return 0, err
	}
	w := costWalker{src: body}
	w.walk(s)
	return w.cost, nil
}

// costWalker walks a request body along its shape, adding up the Go
// bytes its decoding allocates.
type costWalker struct {
	src  []byte
	cost int
	bad  bool
}

func (w *costWalker) take(n int) []byte {
	if n < 0 || n > len(w.src) {
		w.bad = true
		w.src = nil
		return nil
	}
	b := w.src[:n]
	w.src = w.src[n:]
	return b
}

func (w *costWalker) uvarint() uint64 {
	v, n := binary.Uvarint(w.src)
	if n <= 0 {
		w.bad = true
		w.src = nil
		return 0
	}
	w.src = w.src[n:]
	return v
}

// length reads a length or count: int16 or int32 when not flexible, a
// compact one (plus one) when flexible; -1 is null.
func (w *costWalker) length(flexible bool, size int) int {
	if flexible {
		return int(int64(w.uvarint()) - 1)
	}
	b := w.take(size)
	if b == nil {
		return 0
	}
	if size == 2 {
		return int(int16(binary.BigEndian.Uint16(b)))
	}
	return int(int32(binary.BigEndian.Uint32(b)))
}

// walk walks one struct.
func (w *costWalker) walk(s *wireShape) {
	for i := range s.fields {
		if w.bad {
			return
		}
		w.walkField(&s.fields[i], s.flexible)
	}
	if s.flexible && !w.bad {
		w.walkTags()
	}
}

// walkField walks one field.
func (w *costWalker) walkField(f *wireField, flexible bool) {
	if f.kind == wireNullableStruct {
		if b := w.take(1); b != nil && int8(b[0]) >= 0 {
			w.cost += f.elemGoSize
			w.walk(f.elem)
		}
		return
	}
	if f.kind != wireArray {
		w.walkScalar(f.kind, f.fixed, f.nullable, flexible)
		return
	}
	{
		n := w.length(flexible, 4)
		if n <= 0 {
			return
		}
		// As the decoder, refuse more elements than bytes left.
		if n > len(w.src) {
			w.bad = true
			return
		}
		w.cost += n * f.elemGoSize
		for range n {
			if w.bad {
				return
			}
			if f.elem != nil {
				w.walk(f.elem)
				continue
			}
			w.walkScalar(f.elemKind, f.fixed, false, flexible)
		}
	}
}

// walkScalar walks a field that is not an array of elements.
func (w *costWalker) walkScalar(kind wireKind, fixed int, nullable, flexible bool) {
	switch kind {
	case wireFixed:
		w.take(fixed)
	case wireString:
		// A length beyond the bytes left is refused by the decoder,
		// which allocates nothing for it: the walk stops without
		// counting it.
		n := w.length(flexible, 2)
		if n >= 0 && w.take(n) != nil {
			w.cost += n
			if nullable {
				w.cost += pointerGoBytes
			}
		}
	case wireBytes:
		if n := w.length(flexible, 4); n >= 0 {
			w.take(n)
		}
	}
}

// walkTags walks a tag section: each field, known or not, costs
// tagGoBytes.
func (w *costWalker) walkTags() {
	n := w.uvarint()
	if n > uint64(len(w.src)) {
		w.bad = true
		return
	}
	for ; n > 0 && !w.bad; n-- {
		w.uvarint()
		size := w.uvarint()
		if size > uint64(len(w.src)) {
			w.bad = true
			return
		}
		w.take(int(size))
		w.cost += tagGoBytes + tagExpansion*int(size)
	}
}
