//! Kubernetes resource quantities (`1Gi`, `500m`, `1e3`) for the CEL
//! quantity library: parsed exactly as a decimal `mantissa × 10^exponent`
//! (a binary suffix is multiplied out: `1Ki` is 1024), compared and added
//! exactly. Unlike `resource.Quantity`, values are not rounded to
//! nano-units and the canonical string form is not produced (CEL has no
//! function that shows it).

use std::cmp::Ordering;

/// A parsed quantity: `mantissa × 10^exponent`, normalized so that the
/// mantissa has no trailing zero digit (zero is `0 × 10^0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Quantity {
    mantissa: i128,
    exponent: i32,
}

/// Why a string is not a quantity (or an operation overflowed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The string is not in the quantity format.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format,
    /// The value does not fit the representation (or an `int`).
    #[error("quantity out of range")]
    Range,
}

impl Quantity {
    fn new(mantissa: i128, exponent: i32) -> Quantity {
        let (mut m, mut e) = (mantissa, exponent);
        if m == 0 {
            return Quantity {
                mantissa: 0,
                exponent: 0,
            };
        }
        while m % 10 == 0 {
            m /= 10;
            e += 1;
        }
        Quantity {
            mantissa: m,
            exponent: e,
        }
    }

    /// An integer quantity.
    #[must_use]
    pub fn from_int(i: i64) -> Quantity {
        Quantity::new(i128::from(i), 0)
    }

    /// Parses `s` as Kubernetes does: a signed decimal number then a
    /// suffix: binary (`Ki` … `Ei`), decimal SI (`n`, `u`, `m`, `k`, `M`
    /// … `E`) or an exponent (`e3`, `E-2`).
    pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
        let num_end = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
            .unwrap_or(s.len());
        let (num, suffix) = s.split_at(num_end);
        let (neg, digits) = match num.as_bytes().first() {
            Some(b'-') => (true, &num[1..]),
            Some(b'+') => (false, &num[1..]),
            _ => (false, num),
        };
        if digits.is_empty() || digits.contains(['+', '-']) || digits.matches('.').count() > 1 {
            return Err(QuantityError::Format);
        }
        let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(QuantityError::Format);
        }
        let mut mantissa: i128 = 0;
        for c in int_part.bytes().chain(frac_part.bytes()) {
            mantissa = mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add(i128::from(c - b'0')))
                .ok_or(QuantityError::Range)?;
        }
        let mut exponent = -i32::try_from(frac_part.len()).map_err(|_| QuantityError::Range)?;
        let binary = |pow: u32| -> Result<(i128, i32), QuantityError> {
            let factor = 1i128 << (10 * pow);
            Ok((mantissa.checked_mul(factor).ok_or(QuantityError::Range)?, 0))
        };
        let (m, e) = match suffix {
            "" => (mantissa, 0),
            "Ki" => binary(1)?,
            "Mi" => binary(2)?,
            "Gi" => binary(3)?,
            "Ti" => binary(4)?,
            "Pi" => binary(5)?,
            "Ei" => binary(6)?,
            "n" => (mantissa, -9),
            "u" => (mantissa, -6),
            "m" => (mantissa, -3),
            "k" => (mantissa, 3),
            "M" => (mantissa, 6),
            "G" => (mantissa, 9),
            "T" => (mantissa, 12),
            "P" => (mantissa, 15),
            "E" => (mantissa, 18),
            s if s.starts_with(['e', 'E']) => {
                let exp = &s[1..];
                let body = exp.strip_prefix(['+', '-']).unwrap_or(exp);
                if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(QuantityError::Format);
                }
                let e: i32 = exp.parse().map_err(|_| QuantityError::Range)?;
                (mantissa, e)
            }
            _ => return Err(QuantityError::Format),
        };
        exponent = exponent.checked_add(e).ok_or(QuantityError::Range)?;
        Ok(Quantity::new(if neg { -m } else { m }, exponent))
    }

    /// Both mantissas at the smaller exponent, `None` on overflow.
    fn aligned(self, other: Quantity) -> Option<(i128, i128, i32)> {
        let e = self.exponent.min(other.exponent);
        let scale = |q: Quantity| -> Option<i128> {
            let shift = u32::try_from(q.exponent - e).ok()?;
            10i128.checked_pow(shift)?.checked_mul(q.mantissa)
        };
        Some((scale(self)?, scale(other)?, e))
    }

    /// The sum, exactly.
    pub fn checked_add(self, other: Quantity) -> Result<Quantity, QuantityError> {
        let (a, b, e) = self.aligned(other).ok_or(QuantityError::Range)?;
        Ok(Quantity::new(
            a.checked_add(b).ok_or(QuantityError::Range)?,
            e,
        ))
    }

    /// The negation.
    #[must_use]
    pub fn negated(self) -> Quantity {
        Quantity::new(-self.mantissa, self.exponent)
    }

    /// -1, 0 or 1.
    #[must_use]
    pub fn sign(self) -> i64 {
        i64::try_from(self.mantissa.signum()).unwrap_or(0)
    }

    /// The value as an `int`, if it is an integer that fits.
    pub fn as_integer(self) -> Result<i64, QuantityError> {
        if self.exponent < 0 {
            return Err(QuantityError::Range);
        }
        let shift = u32::try_from(self.exponent).map_err(|_| QuantityError::Range)?;
        let v = 10i128
            .checked_pow(shift)
            .and_then(|p| p.checked_mul(self.mantissa))
            .ok_or(QuantityError::Range)?;
        i64::try_from(v).map_err(|_| QuantityError::Range)
    }

    /// The value as a `double` (rounded).
    #[must_use]
    #[allow(clippy::cast_precision_loss)]
    pub fn as_approximate_float(self) -> f64 {
        self.mantissa as f64 * 10f64.powi(self.exponent)
    }
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        match self.aligned(*other) {
            Some((a, b, _)) => a.cmp(&b),
            // Exponents too far apart to align: the signs decide, then the
            // magnitudes (the larger exponent wins for positives).
            None => self.sign().cmp(&other.sign()).then_with(|| {
                let by_exp = self.exponent.cmp(&other.exponent);
                if self.sign() < 0 {
                    by_exp.reverse()
                } else {
                    by_exp
                }
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn parses_the_suffixes() {
        assert_eq!(q("1Ki").as_integer(), Ok(1024));
        assert_eq!(q("1.5Gi").as_integer(), Ok(1_610_612_736));
        assert_eq!(q("1k").as_integer(), Ok(1000));
        assert_eq!(q("1e3"), q("1k"));
        assert_eq!(q("500m").as_approximate_float(), 0.5);
        assert_eq!(q("-2").sign(), -1);
        assert_eq!(q("0").sign(), 0);
        assert_eq!(q("+.5").as_approximate_float(), 0.5);
        assert_eq!(q("10E-1").as_integer(), Ok(1));
    }

    #[test]
    fn rejects_what_kubernetes_rejects() {
        for bad in ["", "abc", "1Zi", "1.2.3", "--1", "1e", "Gi", ".", "1 Gi"] {
            assert!(Quantity::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn compares_and_adds_exactly() {
        assert!(q("1Gi") > q("1G"));
        assert!(q("999m") < q("1"));
        assert_eq!(q("1").checked_add(q("500m")).unwrap(), q("1.5"));
        assert_eq!(q("1Mi").checked_add(q("1Mi").negated()).unwrap(), q("0"));
        assert!(q("0.1").as_integer().is_err());
        assert!(q("1e30").as_integer().is_err());
        assert!(q("1e-300") < q("1e300"));
        assert!(q("-1e300") < q("1e-300"));
    }
}
