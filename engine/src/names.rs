//! Enums the report spells by name. Each is spelled once, by strum's `IntoStaticStr`
//! derive (`#[strum(serialize_all = "kebab-case")]`, or `= "snake_case"` for the unwind
//! sources, or a variant's own `#[strum(serialize = "…")]`); its `as_str` is that name,
//! and [`serde_by_name!`] gives a type with `as_str` and a complete variant list
//! (`strum::VariantArray`) serde impls that write and read exactly those names, so the
//! name a report carries, the text output and the schema test
//! (`engine/tests/report_schema.rs`) all come from one spelling.

/// Implements `Serialize`/`Deserialize` for `$t` by its `as_str` names; an unknown name is
/// a deserialization error listing the known ones.
macro_rules! serde_by_name {
    ($t:ty) => {
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                use strum::VariantArray;
                let name = String::deserialize(d)?;
                <$t>::VARIANTS
                    .iter()
                    .copied()
                    .find(|v| v.as_str() == name)
                    .ok_or_else(|| {
                        let known: Vec<&str> = <$t>::VARIANTS.iter().map(|v| v.as_str()).collect();
                        serde::de::Error::custom(format!(
                            "unknown {} `{name}`, expected one of {}",
                            stringify!($t),
                            known.join(", ")
                        ))
                    })
            }
        }
    };
}
pub(crate) use serde_by_name;
