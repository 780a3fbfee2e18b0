# An example workload over the UCI Adult schema (examples/adult/schema.yaml).
# One SQL WHERE clause per line; an optional "name:" prefix names the query.

# Age bands by sex: within one sex the bands are disjoint (parallel composition).
f_17_29: age BETWEEN 17 AND 29 AND sex = 'Female'
f_30_44: age BETWEEN 30 AND 44 AND sex = 'Female'
f_45_64: age BETWEEN 45 AND 64 AND sex = 'Female'
f_65up:  age >= 65 AND sex = 'Female'
m_17_29: age BETWEEN 17 AND 29 AND sex = 'Male'
m_30_44: age BETWEEN 30 AND 44 AND sex = 'Male'
m_45_64: age BETWEEN 45 AND 64 AND sex = 'Male'
m_65up:  age >= 65 AND sex = 'Male'

# Education and work.
degree:        education IN ('Bachelors', 'Masters', 'Doctorate', 'Prof-school')
private_grads: workclass IN ('Private', 'Self-emp-inc') AND education-num >= 13
long_hours:    hours-per-week > 40
part_time:     hours-per-week < 30
high_income:   income = '>50K'
rich_long:     income = '>50K' AND hours-per-week > 40

# Missing values are explicit: IS NULL matches them.
no_occupation: occupation IS NULL
gov:           workclass IN ('Federal-gov', 'Local-gov', 'State-gov')
