//! The report schema (`report.schema.json`) against the report model: every enum the
//! schema lists names exactly the model's variants, as the model writes them. A variant
//! added to the model and not to the schema (or renamed in one place) fails here, before
//! a report carrying it fails a client's validation. (Field names are checked where real
//! reports are validated against the schema: its objects forbid unknown properties and
//! require every field.)

use std::collections::BTreeSet;

use postmortem_engine::report::{
    Arch, DumpFormat, EndReason, FileGave, FileKind, Identity, ModuleStatus, ModuleUnwind, Os,
    SymbolSource, Trust, UnwindSource,
};
use serde::Serialize;
use serde_json::Value;
use strum::VariantArray;

fn schema() -> Value {
    let text = include_str!("../../report.schema.json");
    serde_json::from_str(text).expect("report.schema.json is JSON")
}

/// The names the schema lists at `pointer` (a JSON pointer to an `enum` array), without
/// `null` (which stands for an absent value, not a variant).
fn listed(schema: &Value, pointer: &str) -> BTreeSet<String> {
    let list = schema
        .pointer(pointer)
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("the schema has no enum at {pointer}"));
    list.iter()
        .filter(|v| !v.is_null())
        .map(|v| v.as_str().expect("enum names are strings").to_string())
        .collect()
}

/// Every variant of `T` as the report writes it.
fn written<T: VariantArray + Serialize>() -> BTreeSet<String> {
    T::VARIANTS
        .iter()
        .map(|v| match serde_json::to_value(v).expect("serializable") {
            Value::String(s) => s,
            other => panic!("a variant written as {other}, not a name"),
        })
        .collect()
}

fn check<T: VariantArray + Serialize>(schema: &Value, pointer: &str) {
    assert_eq!(
        listed(schema, pointer),
        written::<T>(),
        "the schema's enum at {pointer} and the model's {} differ",
        std::any::type_name::<T>()
    );
}

#[test]
fn every_enum_in_the_schema_is_the_models() {
    let s = schema();
    check::<DumpFormat>(&s, "/$defs/dump/properties/format/enum");
    check::<Os>(&s, "/$defs/dump/properties/os/enum");
    check::<Arch>(&s, "/$defs/dump/properties/arch/enum");
    check::<Trust>(&s, "/$defs/frame/properties/trust/enum");
    check::<UnwindSource>(&s, "/$defs/frame/properties/unwind_source/enum");
    check::<SymbolSource>(&s, "/$defs/frame/properties/symbol_source/enum");
    check::<EndReason>(&s, "/$defs/thread/properties/end/enum");
    check::<Identity>(&s, "/$defs/module/properties/identity/enum");
    check::<ModuleStatus>(&s, "/$defs/module/properties/status/enum");
    check::<ModuleUnwind>(&s, "/$defs/module/properties/unwind/items/enum");
    check::<SymbolSource>(&s, "/$defs/module/properties/symbols/items/enum");
    check::<FileKind>(
        &s,
        "/$defs/module/properties/files/items/properties/kind/enum",
    );
    check::<FileGave>(
        &s,
        "/$defs/module/properties/files/items/properties/gave/items/enum",
    );
}

#[test]
fn names_read_back_as_the_variants_they_were_written_from() {
    for v in ModuleUnwind::VARIANTS {
        let text = serde_json::to_string(v).expect("serializable");
        let back: ModuleUnwind = serde_json::from_str(&text).expect("read back");
        assert_eq!(back, *v);
    }
    for v in SymbolSource::VARIANTS {
        let back: SymbolSource =
            serde_json::from_value(Value::from(v.as_str())).expect("read back");
        assert_eq!(back, *v);
    }
    let err = serde_json::from_str::<UnwindSource>("\"eh-frame\"")
        .expect_err("an unknown name is refused");
    assert!(err.to_string().contains("eh_frame"), "{err}");
}

/// Every `ModuleUnwind` is a rule source or the dump's memory: the list the schema is
/// checked against cannot fall behind `UnwindSource`.
#[test]
fn module_unwind_lists_every_rule_source() {
    let rules: Vec<ModuleUnwind> = UnwindSource::VARIANTS
        .iter()
        .map(|&s| ModuleUnwind::Rules(s))
        .chain([ModuleUnwind::DumpMemory])
        .collect();
    assert_eq!(ModuleUnwind::VARIANTS, rules.as_slice());
}
