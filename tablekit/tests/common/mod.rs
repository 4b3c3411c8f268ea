//! Helpers shared by the integration tests.

/// A custom codec: stored upper-case, read lower-case.
pub(crate) mod upper {
    use tablekit::{Value, ValueError};
    pub(crate) fn to_value(v: &str) -> Result<Option<Value>, ValueError> {
        Ok(Some(Value::String(v.to_uppercase())))
    }
    pub(crate) fn from_value(v: Option<&Value>) -> Result<String, ValueError> {
        match v {
            Some(Value::String(s)) => Ok(s.to_lowercase()),
            _ => Err(ValueError::Missing),
        }
    }
}
