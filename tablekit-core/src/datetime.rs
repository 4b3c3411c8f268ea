//! The store's `Edm.DateTime`: UTC, 100-nanosecond ticks, 1601-01-01 to 9999-12-31.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::InvalidInput;

const TICKS_PER_SECOND: i64 = 10_000_000;
const TICKS_PER_DAY: i64 = 86_400 * TICKS_PER_SECOND;
/// Julian day number of 0001-01-01 (proleptic Gregorian), the tick epoch.
const JULIAN_DAY_OF_YEAR_1: i64 = 1_721_426;
/// Ticks from 0001-01-01 to 1970-01-01.
const UNIX_EPOCH_TICKS: i64 = 621_355_968_000_000_000;

/// A point in time as the store keeps it: UTC, in 100-nanosecond ticks.
///
/// Ticks count from 0001-01-01T00:00:00Z like .NET's `DateTime`, but only the
/// store's range is representable: [`DateTime::MIN`] = 1601-01-01T00:00:00Z to
/// [`DateTime::MAX`] = 9999-12-31T23:59:59.9999999Z. Constructors check the range,
/// so a `DateTime` value is always storable.
///
/// ```
/// use tablekit::DateTime;
/// let t: DateTime = "2020-01-02T03:04:05.1234567Z".parse()?;
/// assert_eq!(t.to_string(), "2020-01-02T03:04:05.1234567Z");
/// assert_eq!(t.to_string().parse::<DateTime>()?, t);
/// # Ok::<(), tablekit::InvalidInput>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DateTime {
    ticks: i64,
}

impl DateTime {
    /// 1601-01-01T00:00:00Z, the earliest value the store accepts.
    pub const MIN: DateTime = DateTime {
        ticks: 504_911_232_000_000_000,
    };
    /// 9999-12-31T23:59:59.9999999Z, the latest value the store accepts.
    pub const MAX: DateTime = DateTime {
        ticks: 3_155_378_975_999_999_999,
    };

    /// From 100-ns ticks since 0001-01-01T00:00:00Z. Fails outside [`MIN`](Self::MIN)..=[`MAX`](Self::MAX).
    pub fn from_ticks(ticks: i64) -> Result<DateTime, InvalidInput> {
        if !(Self::MIN.ticks..=Self::MAX.ticks).contains(&ticks) {
            return Err(InvalidInput::DateTime {
                value: format!("{ticks} ticks"),
                reason: "outside 1601-01-01T00:00:00Z ..= 9999-12-31T23:59:59.9999999Z",
            });
        }
        Ok(DateTime { ticks })
    }

    /// 100-ns ticks since 0001-01-01T00:00:00Z.
    pub fn ticks(self) -> i64 {
        self.ticks
    }

    /// `self + duration`. Fails when the result is outside
    /// [`MIN`](Self::MIN)..=[`MAX`](Self::MAX), or when `duration` is not a
    /// whole number of 100-ns ticks (a DateTime holds nothing finer, and
    /// rounding would be a quiet change).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tablekit::DateTime;
    /// let t: DateTime = "2024-02-28T12:00:00Z".parse()?;
    /// assert_eq!(t.checked_add(Duration::from_secs(86_400))?.to_string(), "2024-02-29T12:00:00Z");
    /// assert_eq!(t.checked_sub(Duration::from_secs(3_600))?.to_string(), "2024-02-28T11:00:00Z");
    /// assert!(DateTime::MAX.checked_add(Duration::from_micros(1)).is_err());
    /// # Ok::<(), tablekit::InvalidInput>(())
    /// ```
    pub fn checked_add(self, duration: std::time::Duration) -> Result<DateTime, InvalidInput> {
        let ticks = Self::duration_ticks(duration)?;
        Self::from_ticks(self.ticks.saturating_add(ticks))
    }

    /// `self - duration`; fails as [`checked_add`](Self::checked_add) does.
    pub fn checked_sub(self, duration: std::time::Duration) -> Result<DateTime, InvalidInput> {
        let ticks = Self::duration_ticks(duration)?;
        Self::from_ticks(self.ticks.saturating_sub(ticks))
    }

    /// `self + duration`, or [`DateTime::MAX`] where that is past it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tablekit::DateTime;
    /// assert_eq!(DateTime::MAX.saturating_add(Duration::from_secs(1)), DateTime::MAX);
    /// ```
    pub fn saturating_add(self, duration: std::time::Duration) -> DateTime {
        self.checked_add(duration).unwrap_or(DateTime::MAX)
    }

    /// How long after `earlier` this is; `None` if it is before `earlier`.
    pub fn duration_since(self, earlier: DateTime) -> Option<std::time::Duration> {
        let ticks = u64::try_from(self.ticks - earlier.ticks).ok()?;
        Some(std::time::Duration::from_nanos(ticks).saturating_mul(100))
    }

    /// A duration as whole ticks.
    fn duration_ticks(duration: std::time::Duration) -> Result<i64, InvalidInput> {
        let nanos = duration.as_nanos();
        let whole = nanos.is_multiple_of(100);
        match i64::try_from(nanos / 100) {
            Ok(ticks) if whole => Ok(ticks),
            _ => Err(InvalidInput::DateTime {
                value: format!("{duration:?}"),
                reason: if whole {
                    "a duration longer than any DateTime range"
                } else {
                    "a duration finer than the 100 ns a DateTime holds"
                },
            }),
        }
    }

    /// From a Unix time in nanoseconds, refused when it has digits finer
    /// than the 100 ns a DateTime holds (it would not read back as itself).
    #[doc(hidden)]
    pub fn from_unix_nanos_exact(nanos: i128) -> Result<DateTime, InvalidInput> {
        let t = Self::from_unix_nanos(nanos)?;
        if t.unix_nanos() != nanos {
            return Err(InvalidInput::DateTime {
                value: format!("{nanos} ns since 1970"),
                reason: "finer than the 100 ns a DateTime holds: it would read back as a \
                         different time (`DateTime::from_unix_nanos` truncates it)",
            });
        }
        Ok(t)
    }

    /// From a Unix time in nanoseconds (truncated to 100 ns).
    pub fn from_unix_nanos(nanos: i128) -> Result<DateTime, InvalidInput> {
        let ticks = nanos.div_euclid(100) + i128::from(UNIX_EPOCH_TICKS);
        let ticks = i64::try_from(ticks).map_err(|_| InvalidInput::DateTime {
            value: format!("{nanos} ns since 1970"),
            reason: "outside 1601-01-01T00:00:00Z ..= 9999-12-31T23:59:59.9999999Z",
        })?;
        Self::from_ticks(ticks)
    }

    /// Nanoseconds since 1970-01-01T00:00:00Z (negative before).
    pub fn unix_nanos(self) -> i128 {
        i128::from(self.ticks - UNIX_EPOCH_TICKS) * 100
    }

    /// The current time from the system clock.
    pub fn now() -> DateTime {
        DateTime::from(SystemTime::now())
    }

    /// Parses the ISO-8601 form the store uses: `YYYY-MM-DDTHH:MM:SS`, an optional
    /// fraction of 1 to 7 digits, then `Z`, an offset `±HH:MM` (converted to
    /// UTC), or nothing (taken as UTC, as the service does).
    pub fn parse(text: &str) -> Result<DateTime, InvalidInput> {
        DateTime::parse_text(text).map_err(|reason| InvalidInput::DateTime {
            value: text.to_owned(),
            reason,
        })
    }

    /// [`parse`](DateTime::parse), failing with only the reason: the error
    /// is built once, by the caller, off the common path.
    #[doc(hidden)]
    pub fn parse_text(text: &str) -> Result<DateTime, &'static str> {
        // Hand-parsed: `time`'s RFC 3339 parser requires an offset and allows 9
        // fractional digits, while the store's rules are "offset optional, at
        // most 7 digits".
        let b = text.as_bytes();
        if b.len() < 19
            || b[4] != b'-'
            || b[7] != b'-'
            || b[10] != b'T'
            || b[13] != b':'
            || b[16] != b':'
        {
            return Err("expected YYYY-MM-DDTHH:MM:SS");
        }
        let num = |range: std::ops::Range<usize>| -> Result<i64, &'static str> {
            b[range]
                .iter()
                .try_fold(0i64, |acc, d| match d.wrapping_sub(b'0') {
                    digit @ 0..=9 => Ok(acc * 10 + i64::from(digit)),
                    _ => Err("expected digits"),
                })
        };
        let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if hour > 23 || minute > 59 || second > 59 {
            return Err("time of day out of range");
        }
        let mut rest = &b[19..];
        let mut fraction_ticks = 0i64;
        if let [b'.', tail @ ..] = rest {
            let digits = tail.iter().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 {
                return Err("empty fraction");
            }
            if digits > 7 {
                return Err("more than 7 fractional digits (the store keeps 100 ns ticks)");
            }
            // The digits as a number, scaled to seven digits (100 ns ticks).
            let value = tail[..digits]
                .iter()
                .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0'));
            fraction_ticks = value * 10i64.pow(7 - digits as u32);
            rest = &tail[digits..];
        }
        let offset_seconds = match rest {
            [] | [b'Z'] => 0,
            [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
                let hh = [*h1, *h2];
                let mm = [*m1, *m2];
                if !hh.iter().chain(mm.iter()).all(u8::is_ascii_digit) {
                    return Err("bad UTC offset");
                }
                let hours = i64::from((hh[0] - b'0') * 10 + (hh[1] - b'0'));
                let minutes = i64::from((mm[0] - b'0') * 10 + (mm[1] - b'0'));
                if hours > 23 || minutes > 59 {
                    return Err("bad UTC offset");
                }
                let magnitude = hours * 3600 + minutes * 60;
                if *sign == b'+' { magnitude } else { -magnitude }
            }
            _ => return Err("unexpected characters after the time"),
        };
        let month = time::Month::try_from(month as u8).map_err(|_| "month out of range")?;
        let date = time::Date::from_calendar_date(year as i32, month, day as u8)
            .map_err(|_| "no such date")?;
        let days = i64::from(date.to_julian_day()) - JULIAN_DAY_OF_YEAR_1;
        let seconds = hour * 3600 + minute * 60 + second - offset_seconds;
        let ticks = days * TICKS_PER_DAY + seconds * TICKS_PER_SECOND + fraction_ticks;
        DateTime::from_ticks(ticks)
            .map_err(|_| "outside 1601-01-01T00:00:00Z ..= 9999-12-31T23:59:59.9999999Z")
    }

    /// Calendar parts: (year, month, day, hour, minute, second, ticks within the second).
    fn parts(self) -> (i32, u8, u8, i64, i64, i64, i64) {
        let days = self.ticks.div_euclid(TICKS_PER_DAY);
        let in_day = self.ticks.rem_euclid(TICKS_PER_DAY);
        let (year, month, day) = civil_date(days);
        let seconds = in_day / TICKS_PER_SECOND;
        (
            year,
            month,
            day,
            seconds / 3600,
            seconds / 60 % 60,
            seconds % 60,
            in_day % TICKS_PER_SECOND,
        )
    }

    /// Writes the timestamp with exactly seven fractional digits, as Azurite
    /// writes ETags and Timestamps (`2021-02-01T20:58:58.3738734Z`).
    pub fn to_string_7(self) -> String {
        let mut out = String::with_capacity(28);
        self.write_iso(&mut out, ":", false);
        out
    }

    /// Appends the ISO-8601 text to `out`, with `colon` between the time's
    /// fields (`%3A` inside ETags) and trailing fraction zeros trimmed when
    /// `trim` is set.
    #[doc(hidden)]
    pub fn write_iso(self, out: &mut impl std::fmt::Write, colon: &str, trim: bool) {
        // Writing into a `String` cannot fail; a formatter's error is ignored
        // here and reported by the formatting machinery itself.
        let _ = out.write_str(self.iso_text(colon, trim).as_str());
    }

    /// The ISO-8601 text of [`write_iso`](DateTime::write_iso), on the stack.
    /// Hand-rolled: it runs on every write and read of a date, and `format!`
    /// is several times slower.
    #[doc(hidden)]
    pub fn iso_text(self, colon: &str, trim: bool) -> IsoText {
        let mut text = IsoText {
            bytes: [0; 36],
            len: 0,
        };
        let (y, mo, d, h, mi, s, frac) = self.parts();
        text.digits(i64::from(y), 4);
        text.push(b"-");
        text.digits(i64::from(mo), 2);
        text.push(b"-");
        text.digits(i64::from(d), 2);
        text.push(b"T");
        text.digits(h, 2);
        text.push(colon.as_bytes());
        text.digits(mi, 2);
        text.push(colon.as_bytes());
        text.digits(s, 2);
        if !trim || frac != 0 {
            let mut width = 7;
            let mut frac = frac;
            while trim && frac % 10 == 0 {
                frac /= 10;
                width -= 1;
            }
            text.push(b".");
            text.digits(frac, width);
        }
        text.push(b"Z");
        text
    }
}

/// The proleptic Gregorian (year, month, day) of the day `days` after
/// 0001-01-01 (0 ..= the days to 9999-12-31). Written by hand: it runs for
/// every ETag and Timestamp a read or write makes, and the general calendar
/// of `time` (which the tests check it against, day by day) costs several
/// times as much. Days are counted from 0000-03-01, so that the leap day
/// ends a year: a 400-year cycle is 146,097 days, its years 365 days with
/// one more every fourth, but for every hundredth bar the fourth hundredth.
fn civil_date(days: i64) -> (i32, u8, u8) {
    // 0001-01-01 is day 306 after 0000-03-01; days are never negative here.
    let z = days.max(0) + 306;
    let era = z / 146_097;
    let of_era = z % 146_097;
    let year_of_era = (of_era - of_era / 1_460 + of_era / 36_524 - of_era / 146_096) / 365;
    let of_year = of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    // Months from March: 153 days in every five.
    let from_march = (5 * of_year + 2) / 153;
    let day = of_year - (153 * from_march + 2) / 5 + 1;
    let month = if from_march < 10 {
        from_march + 3
    } else {
        from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year as i32, month as u8, day as u8)
}

/// "00" to "99", one after another.
const DIGIT_PAIRS: &[u8; 200] = b"\
    0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

/// The text of a [`DateTime`], at most 34 bytes
/// (`9999-12-31T23%3A59%3A59.9999999Z`), held on the stack.
#[doc(hidden)]
pub struct IsoText {
    bytes: [u8; 36],
    len: usize,
}

impl IsoText {
    /// Appends ASCII; what does not fit is dropped (nothing longer than the
    /// widest date, with a `%3A` separator, is ever written).
    fn push(&mut self, text: &[u8]) {
        if let Some(slot) = self.bytes.get_mut(self.len..self.len + text.len()) {
            slot.copy_from_slice(text);
            self.len += text.len();
        }
    }

    /// Appends `value` as exactly `width` decimal digits (its lowest ones),
    /// two at a time from a table; nothing where the text has no room, as
    /// [`push`](IsoText::push).
    fn digits(&mut self, value: i64, width: usize) {
        let Some(slot) = self.bytes.get_mut(self.len..self.len + width) else {
            return;
        };
        let mut rest = value.unsigned_abs();
        let mut at = width;
        while at >= 2 {
            let pair = (rest % 100) as usize * 2;
            slot[at - 2..at].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
            rest /= 100;
            at -= 2;
        }
        if at == 1 {
            slot[0] = b'0' + (rest % 10) as u8;
        }
        self.len += width;
    }

    /// The text.
    #[doc(hidden)]
    pub fn as_str(&self) -> &str {
        // Only ASCII digits and punctuation are ever written.
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }

    /// The text's bytes.
    #[doc(hidden)]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Trailing zero digits of the fraction are trimmed, as the service does
/// (`2020-09-17T00:00:00Z`, `…05.1Z`).
impl fmt::Display for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_iso(f, ":", true);
        Ok(())
    }
}

impl fmt::Debug for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DateTime({self})")
    }
}

impl FromStr for DateTime {
    type Err = InvalidInput;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DateTime::parse(s)
    }
}

/// Clamps to the store's range: times before 1601 become [`DateTime::MIN`], after
/// 9999 [`DateTime::MAX`]; use [`DateTime::try_from`] on a
/// `time::OffsetDateTime` or [`DateTime::from_unix_nanos`] for a checked
/// conversion.
impl From<SystemTime> for DateTime {
    fn from(t: SystemTime) -> DateTime {
        let nanos = match t.duration_since(UNIX_EPOCH) {
            Ok(after) => after.as_nanos() as i128,
            Err(before) => -(before.duration().as_nanos() as i128),
        };
        DateTime::from_unix_nanos(nanos).unwrap_or(if nanos < 0 {
            DateTime::MIN
        } else {
            DateTime::MAX
        })
    }
}

impl From<DateTime> for SystemTime {
    fn from(t: DateTime) -> SystemTime {
        let nanos = t.unix_nanos();
        if nanos >= 0 {
            UNIX_EPOCH + Duration::from_nanos(nanos as u64)
        } else {
            UNIX_EPOCH - Duration::from_nanos(nanos.unsigned_abs() as u64)
        }
    }
}

/// Exact: a time outside the store's range, or with digits finer than the
/// 100 ns a DateTime holds, is an error ([`DateTime::from_unix_nanos`] of
/// `t.unix_timestamp_nanos()` truncates instead).
impl TryFrom<time::OffsetDateTime> for DateTime {
    type Error = InvalidInput;
    fn try_from(t: time::OffsetDateTime) -> Result<DateTime, InvalidInput> {
        DateTime::from_unix_nanos_exact(t.unix_timestamp_nanos())
    }
}

impl From<DateTime> for time::OffsetDateTime {
    fn from(t: DateTime) -> time::OffsetDateTime {
        // Every tick in MIN..=MAX is inside `time`'s default range (years ±9999).
        time::OffsetDateTime::from_unix_timestamp_nanos(t.unix_nanos())
            .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-written calendar gives `time`'s date for every day from
    /// 0001-01-01 to 9999-12-31, and the text carries it with every field
    /// at its width.
    #[test]
    fn the_calendar_agrees_with_time_on_every_day() {
        let last = i64::from(
            time::Date::from_calendar_date(9999, time::Month::December, 31)
                .unwrap()
                .to_julian_day(),
        ) - JULIAN_DAY_OF_YEAR_1;
        for days in 0..=last {
            let date = time::Date::from_julian_day((days + JULIAN_DAY_OF_YEAR_1) as i32).unwrap();
            let expected = (date.year(), u8::from(date.month()), date.day());
            assert_eq!(civil_date(days), expected, "day {days}");
        }
        let at = |ticks| DateTime::from_ticks(ticks).unwrap();
        let leap = DateTime::parse("2024-02-29T09:05:07.0000001Z").unwrap();
        assert_eq!(leap.to_string(), "2024-02-29T09:05:07.0000001Z");
        assert_eq!(
            leap.iso_text("%3A", true).as_str(),
            "2024-02-29T09%3A05%3A07.0000001Z"
        );
        assert_eq!(
            at(leap.ticks() + 9_999_999 - 1).to_string_7(),
            "2024-02-29T09:05:07.9999999Z"
        );
        assert_eq!(
            DateTime::parse("1900-03-01T23:59:59.5Z")
                .unwrap()
                .to_string(),
            "1900-03-01T23:59:59.5Z"
        );
    }

    #[test]
    fn bounds_format_and_parse() {
        assert_eq!(DateTime::MIN.to_string(), "1601-01-01T00:00:00Z");
        assert_eq!(DateTime::MAX.to_string(), "9999-12-31T23:59:59.9999999Z");
        assert_eq!(
            DateTime::parse("1601-01-01T00:00:00Z").unwrap(),
            DateTime::MIN
        );
        assert_eq!(
            DateTime::parse("9999-12-31T23:59:59.9999999Z").unwrap(),
            DateTime::MAX
        );
        assert!(DateTime::parse("1600-12-31T23:59:59.9999999Z").is_err());
        assert!(DateTime::from_ticks(DateTime::MIN.ticks() - 1).is_err());
        assert!(DateTime::from_ticks(DateTime::MAX.ticks() + 1).is_err());
    }

    #[test]
    fn trims_trailing_zeros_like_the_service() {
        let t = DateTime::parse("2020-09-17T00:00:00.000Z").unwrap();
        assert_eq!(t.to_string(), "2020-09-17T00:00:00Z");
        assert_eq!(t.to_string_7(), "2020-09-17T00:00:00.0000000Z");
        let t = DateTime::parse("2020-09-17T00:00:00.111Z").unwrap();
        assert_eq!(t.to_string(), "2020-09-17T00:00:00.111Z");
    }

    #[test]
    fn offsets_and_missing_zone() {
        let utc = DateTime::parse("2020-01-02T03:04:05Z").unwrap();
        assert_eq!(DateTime::parse("2020-01-02T03:04:05").unwrap(), utc);
        assert_eq!(DateTime::parse("2020-01-02T05:04:05+02:00").unwrap(), utc);
        assert_eq!(DateTime::parse("2020-01-01T22:34:05-04:30").unwrap(), utc);
    }

    #[test]
    fn rejects_bad_text() {
        for bad in [
            "not a date",
            "2020-13-01T00:00:00Z",
            "2020-02-30T00:00:00Z",
            "2020-01-01T24:00:00Z",
            "2020-01-01T00:00:00.12345678Z",
            "2020-01-01T00:00:00.Z",
            "2020-01-01T00:00:00ZZ",
            "2020-01-01 00:00:00Z",
            "0001-01-01T00:00:00Z",
            "2020-0x-01T00:00:00Z",
            "2020-01-01T00:+0:00Z",
            "+020-01-01T00:00:00Z",
            "2020-01-01T00:00:00.1a3Z",
        ] {
            assert!(DateTime::parse(bad).is_err(), "{bad} accepted");
        }
    }

    proptest::proptest! {
        #[test]
        fn text_round_trips_and_matches_a_reference(ticks in DateTime::MIN.ticks()..=DateTime::MAX.ticks()) {
            let t = DateTime::from_ticks(ticks).unwrap();
            proptest::prop_assert_eq!(DateTime::parse(&t.to_string()).unwrap(), t);
            proptest::prop_assert_eq!(DateTime::parse(&t.to_string_7()).unwrap(), t);
            let odt = time::OffsetDateTime::from(t);
            let frac = format!("{:07}", odt.nanosecond() / 100);
            let reference = format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{frac}Z",
                odt.year(), u8::from(odt.month()), odt.day(), odt.hour(), odt.minute(), odt.second()
            );
            proptest::prop_assert_eq!(t.to_string_7(), reference.clone());
            let trimmed = reference.trim_end_matches('Z').trim_end_matches('0').trim_end_matches('.').to_owned() + "Z";
            proptest::prop_assert_eq!(t.to_string(), trimmed);
        }
    }

    #[test]
    fn unix_and_time_conversions() {
        let t = DateTime::parse("1970-01-01T00:00:00.0000001Z").unwrap();
        assert_eq!(t.unix_nanos(), 100);
        let odt = time::OffsetDateTime::from(t);
        assert_eq!(DateTime::try_from(odt).unwrap(), t);
        let st = SystemTime::from(t);
        assert_eq!(DateTime::from(st), t);
        let before = DateTime::parse("1700-05-06T07:08:09.5Z").unwrap();
        assert_eq!(DateTime::from(SystemTime::from(before)), before);
    }

    #[test]
    fn arithmetic_is_exact_or_refused() {
        use std::time::Duration;
        let t = DateTime::parse("2024-02-28T23:59:59.9999999Z").unwrap();
        let later = t.checked_add(Duration::from_nanos(100)).unwrap();
        assert_eq!(later.to_string(), "2024-02-29T00:00:00Z");
        assert_eq!(later.checked_sub(Duration::from_nanos(100)).unwrap(), t);
        assert_eq!(later.duration_since(t), Some(Duration::from_nanos(100)));
        assert_eq!(t.duration_since(later), None);
        assert!(matches!(
            t.checked_add(Duration::from_nanos(150)),
            Err(InvalidInput::DateTime { .. })
        ));
        assert!(
            DateTime::MIN
                .checked_sub(Duration::from_nanos(100))
                .is_err()
        );
        assert!(
            DateTime::MAX
                .checked_add(Duration::from_nanos(100))
                .is_err()
        );
        assert!(t.checked_add(Duration::MAX).is_err());
        assert_eq!(
            DateTime::MAX
                .duration_since(DateTime::MIN)
                .unwrap()
                .as_nanos(),
            (DateTime::MAX.ticks() - DateTime::MIN.ticks()) as u128 * 100
        );
    }
}
