//! Oslo msgpackutils datetimes: msgpack ext type 1.
//!
//! Oslo writes a `datetime.datetime` as an ext 1 whose payload is itself a
//! msgpack map with the keys `day`, `month`, `year`, `hour`, `minute`,
//! `second`, `microsecond` in that order, plus `tz` (the zone's name) last
//! when the datetime is aware. Taskflow itself only writes naive UTC.

use rmpv::Value;

use super::{map_get, oslo_loads, truthy, write_ext, write_int, write_map_len, write_str, MAX_DEPTH};

/// The ext type oslo uses for `datetime.datetime`.
const EXT_DATETIME: i8 = 1;

/// The payload keys, in the order oslo writes them.
const FIELDS: [&str; 7] = ["day", "month", "year", "hour", "minute", "second", "microsecond"];

const MICROS_PER_SECOND: i64 = 1_000_000;
const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;

/// A datetime as oslo msgpackutils stores it (ext type 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsloDateTime {
    /// Year (Python allows 1 to 9999).
    pub year: i32,
    /// Month, 1 to 12.
    pub month: u32,
    /// Day of the month, from 1.
    pub day: u32,
    /// Hour, 0 to 23.
    pub hour: u32,
    /// Minute, 0 to 59.
    pub minute: u32,
    /// Second, 0 to 59.
    pub second: u32,
    /// Microsecond, 0 to 999999.
    pub microsecond: u32,
    /// The zone name of an aware datetime (e.g. `"UTC"`); `None` for the
    /// naive UTC values taskflow writes.
    pub tz: Option<String>,
}

impl OsloDateTime {
    /// The naive UTC datetime `us` microseconds after the Unix epoch
    /// (proleptic Gregorian calendar).
    pub fn from_unix_micros(us: i64) -> Self {
        let (year, month, day) = civil_from_days(us.div_euclid(MICROS_PER_DAY));
        let micros_of_day = us.rem_euclid(MICROS_PER_DAY);
        let secs = (micros_of_day / MICROS_PER_SECOND) as u32;
        OsloDateTime {
            year,
            month,
            day,
            hour: secs / 3600,
            minute: secs / 60 % 60,
            second: secs % 60,
            microsecond: (micros_of_day % MICROS_PER_SECOND) as u32,
            tz: None,
        }
    }

    /// Microseconds since the Unix epoch, reading the fields as UTC (`tz`
    /// is ignored). Saturates at the `i64` bounds on absurd fields.
    pub fn to_unix_micros(&self) -> i64 {
        let days = days_from_civil(self.year.into(), self.month.into(), self.day.into());
        let secs = i64::from(self.hour) * 3600 + i64::from(self.minute) * 60 + i64::from(self.second);
        let micros = i128::from(days) * i128::from(MICROS_PER_DAY)
            + i128::from(secs) * i128::from(MICROS_PER_SECOND)
            + i128::from(self.microsecond);
        micros.clamp(i64::MIN.into(), i64::MAX.into()) as i64
    }

    /// The whole msgpack value (ext header and payload), byte for byte what
    /// oslo `msgpackutils.dumps` writes for the same datetime: `c7 <len> 01`
    /// then the payload map with every int in its smallest form.
    pub fn encode_ext(&self) -> Vec<u8> {
        let mut payload = Vec::with_capacity(64);
        write_map_len(&mut payload, FIELDS.len() + usize::from(self.tz.is_some()));
        let values = [
            self.day.into(),
            self.month.into(),
            self.year.into(),
            self.hour.into(),
            self.minute.into(),
            self.second.into(),
            self.microsecond.into(),
        ];
        for (key, value) in FIELDS.iter().zip(values) {
            write_str(&mut payload, key);
            write_int(&mut payload, value);
        }
        if let Some(tz) = &self.tz {
            write_str(&mut payload, "tz");
            write_str(&mut payload, tz);
        }
        let mut out = Vec::with_capacity(payload.len() + 3);
        write_ext(&mut out, EXT_DATETIME, &payload);
        out
    }

    /// Decodes a whole msgpack value that must be an ext 1 datetime, such
    /// as the content of a `<jobkey>.last_modified` key.
    pub fn decode_ext(bytes: &[u8]) -> Result<Self, String> {
        match oslo_loads(bytes, MAX_DEPTH)? {
            Value::Ext(EXT_DATETIME, payload) => Self::decode_ext_payload(&payload),
            _ => Err("not a datetime (ext 1)".into()),
        }
    }

    /// Decodes the payload of an ext 1 as oslo does. Keys may be str or,
    /// as older Python 2 writers made them, bin (oslo then wants every key
    /// and `tz` as ASCII bin). All seven fields are required and must be
    /// ints in Python's ranges; `tz`, when present and non-empty, must be a
    /// string. Zone names are not checked against a tz database (Python
    /// would refuse an unknown one).
    pub fn decode_ext_payload(payload: &[u8]) -> Result<Self, String> {
        decode_payload(payload, MAX_DEPTH)
    }

    /// ISO 8601 text like Python's `isoformat()` but always with the
    /// microseconds: `2024-05-06T07:08:10.123456`. An aware value gets
    /// `+00:00` for the zone `UTC` and `[<zone name>]` for any other zone.
    pub fn iso(&self) -> String {
        let mut text = format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}",
            self.year, self.month, self.day, self.hour, self.minute, self.second, self.microsecond
        );
        match self.tz.as_deref() {
            None => {}
            Some("UTC") => text.push_str("+00:00"),
            Some(zone) => text.push_str(&format!("[{zone}]")),
        }
        text
    }
}

/// Checks an ext 1 (or ext 6, xmlrpc DateTime) payload; see
/// [`OsloDateTime::decode_ext_payload`].
pub(super) fn check_datetime_payload(payload: &[u8], depth: usize) -> Result<(), String> {
    decode_payload(payload, depth).map(drop)
}

/// Checks an ext 7 (`datetime.date`) payload: `year`, `month`, `day`.
pub(super) fn check_date_payload(payload: &[u8], depth: usize) -> Result<(), String> {
    let (dict, _) = oslo_dict(payload, depth)?;
    let [day, month, year] = ["day", "month", "year"].map(|name| int_field(&dict, name));
    check_date(year?, month?, day?)
}

fn decode_payload(payload: &[u8], depth: usize) -> Result<OsloDateTime, String> {
    let (dict, bin_keys) = oslo_dict(payload, depth)?;
    let [day, month, year, hour, minute, second, microsecond] = FIELDS.map(|name| int_field(&dict, name));
    let (day, month, year) = (day?, month?, year?);
    let (hour, minute, second, microsecond) = (hour?, minute?, second?, microsecond?);
    check_date(year, month, day)?;
    in_range("hour", hour, 0, 23)?;
    in_range("minute", minute, 0, 59)?;
    in_range("second", second, 0, 59)?;
    in_range("microsecond", microsecond, 0, 999_999)?;
    let tz = match map_get(&dict, "tz") {
        // With bin keys oslo decodes `tz` from ASCII bytes first.
        Some(Value::Binary(b)) if bin_keys && b.is_ascii() => Some(String::from_utf8_lossy(b).into_owned()),
        Some(_) if bin_keys => return Err("field \"tz\" is not ascii bin".into()),
        Some(v) if truthy(v) => Some(v.as_str().ok_or("field \"tz\" is not a string")?.to_owned()),
        _ => None,
    };
    Ok(OsloDateTime {
        year: year as i32,
        month: month as u32,
        day: day as u32,
        hour: hour as u32,
        minute: minute as u32,
        second: second as u32,
        microsecond: microsecond as u32,
        tz: tz.filter(|zone| !zone.is_empty()),
    })
}

/// Loads an oslo ext payload that must be a map. Like oslo, when the bin
/// key `b"day"` is present every key must be ASCII bin and is turned into
/// a str key; the flag returned tells that this happened.
fn oslo_dict(payload: &[u8], depth: usize) -> Result<(Vec<(Value, Value)>, bool), String> {
    let Value::Map(entries) = oslo_loads(payload, depth)? else {
        return Err("payload is not a map".into());
    };
    if !entries
        .iter()
        .any(|(k, _)| matches!(k, Value::Binary(b) if b == b"day"))
    {
        return Ok((entries, false));
    }
    let converted = entries
        .into_iter()
        .map(|(key, value)| match key {
            Value::Binary(b) if b.is_ascii() => {
                Ok((Value::from(String::from_utf8_lossy(&b).into_owned()), value))
            }
            _ => Err("payload mixes bin keys with other keys".to_string()),
        })
        .collect::<Result<_, _>>()?;
    Ok((converted, true))
}

/// An int field; like Python, a bool counts as 0 or 1.
fn int_field(dict: &[(Value, Value)], name: &str) -> Result<i64, String> {
    match map_get(dict, name) {
        None => Err(format!("missing field {name:?}")),
        Some(Value::Boolean(b)) => Ok(i64::from(*b)),
        Some(v) => v
            .as_i64()
            .ok_or_else(|| format!("field {name:?} is not an integer")),
    }
}

fn in_range(name: &str, value: i64, low: i64, high: i64) -> Result<(), String> {
    if (low..=high).contains(&value) {
        Ok(())
    } else {
        Err(format!("field {name:?} out of range: {value}"))
    }
}

fn check_date(year: i64, month: i64, day: i64) -> Result<(), String> {
    in_range("year", year, 1, 9999)?;
    in_range("month", month, 1, 12)?;
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    in_range("day", day, 1, days_in_month)
}

/// (year, month, day) of a day count since 1970-01-01 (H. Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i32, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year as i32, month, day)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = year - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let shifted_month = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * shifted_month + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::fixtures::{golden, unhex};

    fn payload_of(ext: &[u8]) -> &[u8] {
        assert_eq!(ext[0], 0xc7, "ext8 header");
        assert_eq!(usize::from(ext[1]), ext.len() - 3, "ext8 length");
        assert_eq!(ext[2], 1, "ext type 1");
        &ext[3..]
    }

    fn naive(
        year: i32,
        month: u32,
        day: u32,
        hour: u32,
        minute: u32,
        second: u32,
        microsecond: u32,
    ) -> OsloDateTime {
        OsloDateTime {
            year,
            month,
            day,
            hour,
            minute,
            second,
            microsecond,
            tz: None,
        }
    }

    #[test]
    fn every_golden_sample_round_trips() {
        let samples = golden()["datetime_ext_samples"]
            .as_object()
            .expect("datetime_ext_samples")
            .clone();
        assert_eq!(samples.len(), 10);
        for (name, sample) in samples {
            let bytes = unhex(sample["value_hex"].as_str().expect("value_hex"));
            let dt = OsloDateTime::decode_ext_payload(payload_of(&bytes))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(dt.encode_ext(), bytes, "{name}: re-encoding");
            assert_eq!(OsloDateTime::decode_ext(&bytes).as_ref(), Ok(&dt), "{name}");
            let fields = &sample["decoded"]["payload"];
            let got = [
                dt.day,
                dt.month,
                dt.year as u32,
                dt.hour,
                dt.minute,
                dt.second,
                dt.microsecond,
            ];
            for (field, value) in FIELDS.iter().zip(got) {
                assert_eq!(fields[field].as_u64(), Some(u64::from(value)), "{name}: {field}");
            }
            assert_eq!(dt.tz.as_deref(), fields["tz"].as_str(), "{name}: tz");
            // Python leaves out a zero microsecond; iso() always shows it.
            let python_iso = sample["iso"].as_str().expect("iso");
            let expected = match python_iso.split_once('.') {
                Some(_) => python_iso.to_owned(),
                None => format!("{python_iso}.000000"),
            };
            assert_eq!(dt.iso(), expected, "{name}: iso");
            if dt.tz.is_none() {
                assert_eq!(
                    OsloDateTime::from_unix_micros(dt.to_unix_micros()),
                    dt,
                    "{name}: unix micros"
                );
            }
        }
    }

    #[test]
    fn last_modified_value_round_trips() {
        let sample = &golden()["samples"]["last_modified_value"];
        let bytes = unhex(sample["value_hex"].as_str().expect("value_hex"));
        let dt = OsloDateTime::decode_ext_payload(payload_of(&bytes)).expect("decodes");
        assert_eq!(dt, naive(2024, 5, 6, 7, 8, 14, 123_456));
        assert_eq!(dt.encode_ext(), bytes);
        assert_eq!(dt.iso(), sample["oslo_loads"].as_str().expect("oslo_loads"));
    }

    #[test]
    fn unix_micros_conversions() {
        assert_eq!(OsloDateTime::from_unix_micros(0), naive(1970, 1, 1, 0, 0, 0, 0));
        assert_eq!(
            OsloDateTime::from_unix_micros(-1),
            naive(1969, 12, 31, 23, 59, 59, 999_999)
        );
        assert_eq!(
            OsloDateTime::from_unix_micros(1_714_979_290_123_456),
            naive(2024, 5, 6, 7, 8, 10, 123_456)
        );
        assert_eq!(
            OsloDateTime::from_unix_micros(-62_135_596_800_000_000),
            naive(1, 1, 1, 0, 0, 0, 0)
        );
        let last = 253_402_300_799_999_999;
        assert_eq!(
            OsloDateTime::from_unix_micros(last),
            naive(9999, 12, 31, 23, 59, 59, 999_999)
        );
        assert_eq!(
            naive(2000, 2, 29, 0, 0, 0, 0).to_unix_micros(),
            951_782_400_000_000
        );
        let mut us = -62_135_596_800_000_000;
        while us <= last {
            assert_eq!(OsloDateTime::from_unix_micros(us).to_unix_micros(), us);
            us += 86_399_999_999 * 7 + 12_345;
        }
        for extreme in [i64::MIN, i64::MAX] {
            assert_eq!(OsloDateTime::from_unix_micros(extreme).to_unix_micros(), extreme);
        }
        let absurd = OsloDateTime {
            year: i32::MAX,
            month: u32::MAX,
            ..naive(1, 1, u32::MAX, u32::MAX, 0, 0, 0)
        };
        assert_eq!(absurd.to_unix_micros(), i64::MAX);
    }

    #[test]
    fn bad_payloads_are_refused() {
        let mut good = naive(2024, 1, 2, 3, 4, 5, 6).encode_ext();
        assert!(OsloDateTime::decode_ext_payload(payload_of(&good)).is_ok());
        good.push(0);
        assert!(OsloDateTime::decode_ext(&good).is_err(), "trailing byte");
        let payload = |entries: Vec<(Value, Value)>| {
            let mut out = Vec::new();
            super::super::write_value(&mut out, &Value::Map(entries));
            out
        };
        let fields = |skip: &str, bad: Option<(&str, Value)>| {
            let mut entries: Vec<(Value, Value)> = FIELDS
                .iter()
                .filter(|name| **name != skip)
                .map(|name| (Value::from(*name), Value::from(1)))
                .collect();
            entries.extend(bad.map(|(k, v)| (Value::from(k), v)));
            payload(entries)
        };
        for name in FIELDS {
            assert_eq!(
                OsloDateTime::decode_ext_payload(&fields(name, None)),
                Err(format!("missing field {name:?}"))
            );
        }
        let refused = [
            fields("month", Some(("month", Value::from(13)))),
            fields("day", Some(("day", Value::from(0)))),
            fields("year", Some(("year", Value::from(10_000)))),
            fields("hour", Some(("hour", Value::from(24)))),
            fields("microsecond", Some(("microsecond", Value::from(1_000_000)))),
            fields("second", Some(("second", Value::from("5")))),
            fields("", Some(("tz", Value::from(3)))),
            payload(vec![
                (Value::from("day"), Value::from(30)),
                (Value::from("month"), Value::from(2)),
            ]),
            vec![0x90],
            vec![0xc1],
        ];
        for bytes in refused {
            assert!(OsloDateTime::decode_ext_payload(&bytes).is_err(), "{bytes:02x?}");
        }
        // 29 February only in leap years; an empty tz means naive.
        let feb29 = |year: i64| {
            let mut entries = vec![
                (Value::from("day"), Value::from(29)),
                (Value::from("month"), Value::from(2)),
            ];
            entries.push((Value::from("year"), Value::from(year)));
            for name in ["hour", "minute", "second", "microsecond"] {
                entries.push((Value::from(name), Value::from(0)));
            }
            entries.push((Value::from("tz"), Value::from("")));
            OsloDateTime::decode_ext_payload(&payload(entries))
        };
        assert_eq!(feb29(2000).map(|d| d.tz), Ok(None));
        assert!(feb29(1900).is_err());
    }

    #[test]
    fn bin_keys_follow_oslo() {
        let entry = |k: &str, v: Value| (Value::Binary(k.as_bytes().to_vec()), v);
        let mut entries: Vec<(Value, Value)> =
            FIELDS.iter().map(|name| entry(name, Value::from(1))).collect();
        let encode = |entries: &Vec<(Value, Value)>| {
            let mut out = Vec::new();
            super::super::write_value(&mut out, &Value::Map(entries.clone()));
            out
        };
        assert_eq!(
            OsloDateTime::decode_ext_payload(&encode(&entries)),
            Ok(naive(1, 1, 1, 1, 1, 1, 1))
        );
        entries.push(entry("tz", Value::Binary(b"UTC".to_vec())));
        let aware = OsloDateTime::decode_ext_payload(&encode(&entries)).expect("bin tz");
        assert_eq!(aware.tz.as_deref(), Some("UTC"));
        assert_eq!(aware.iso(), "0001-01-01T01:01:01.000001+00:00");
        entries.pop();
        entries.push(entry("tz", Value::from("UTC")));
        assert!(
            OsloDateTime::decode_ext_payload(&encode(&entries)).is_err(),
            "str tz with bin keys"
        );
        entries.pop();
        entries.push((Value::from("extra"), Value::Nil));
        assert!(
            OsloDateTime::decode_ext_payload(&encode(&entries)).is_err(),
            "mixed keys"
        );
    }

    #[test]
    fn long_zone_names_use_ext16_and_iso_shows_the_zone() {
        let dt = OsloDateTime {
            tz: Some("Z".repeat(300)),
            ..naive(2024, 1, 2, 3, 4, 5, 6)
        };
        let bytes = dt.encode_ext();
        assert_eq!(bytes[0], 0xc8);
        assert_eq!(OsloDateTime::decode_ext(&bytes), Ok(dt));
        let paris = OsloDateTime {
            tz: Some("Europe/Paris".into()),
            ..naive(2024, 1, 2, 3, 4, 5, 6)
        };
        assert_eq!(paris.iso(), "2024-01-02T03:04:05.000006[Europe/Paris]");
        assert!(
            OsloDateTime::decode_ext(&[0xd4, 0x02, 0x00]).is_err(),
            "other ext"
        );
    }
}
