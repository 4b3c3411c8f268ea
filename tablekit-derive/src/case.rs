//! `rename_all` rules.

/// How field names become property names.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum RenameRule {
    Pascal,
    Camel,
    Snake,
    ScreamingSnake,
    Lower,
    Upper,
}

impl RenameRule {
    pub(crate) const NAMES: &'static [&'static str] = &[
        "PascalCase",
        "camelCase",
        "snake_case",
        "SCREAMING_SNAKE_CASE",
        "lowercase",
        "UPPERCASE",
    ];

    pub(crate) fn from_name(name: &str) -> Option<RenameRule> {
        Some(match name {
            "PascalCase" => RenameRule::Pascal,
            "camelCase" => RenameRule::Camel,
            "snake_case" => RenameRule::Snake,
            "SCREAMING_SNAKE_CASE" => RenameRule::ScreamingSnake,
            "lowercase" => RenameRule::Lower,
            "UPPERCASE" => RenameRule::Upper,
            _ => return None,
        })
    }

    /// Applies the rule to a snake_case field name.
    pub(crate) fn apply(self, field: &str) -> String {
        let pascal = || {
            field
                .split('_')
                .filter(|w| !w.is_empty())
                .map(|w| {
                    let mut c = w.chars();
                    c.next()
                        .map(|f| f.to_uppercase().chain(c).collect::<String>())
                        .unwrap_or_default()
                })
                .collect::<String>()
        };
        match self {
            RenameRule::Pascal => pascal(),
            RenameRule::Camel => {
                let p = pascal();
                let mut c = p.chars();
                c.next()
                    .map(|f| f.to_lowercase().chain(c).collect())
                    .unwrap_or_default()
            }
            RenameRule::Snake => field.to_owned(),
            RenameRule::ScreamingSnake => field.to_uppercase(),
            RenameRule::Lower => field.replace('_', "").to_lowercase(),
            RenameRule::Upper => field.replace('_', "").to_uppercase(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RenameRule::*;

    #[test]
    fn rules() {
        assert_eq!(Pascal.apply("hire_date"), "HireDate");
        assert_eq!(Camel.apply("hire_date"), "hireDate");
        assert_eq!(Snake.apply("hire_date"), "hire_date");
        assert_eq!(ScreamingSnake.apply("hire_date"), "HIRE_DATE");
        assert_eq!(Lower.apply("hire_date"), "hiredate");
        assert_eq!(Upper.apply("hire_date"), "HIREDATE");
    }
}
